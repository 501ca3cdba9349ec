"""A base URL with credentials (issue 24, item 7): ``http://user:PW@host/v1`` is refused up front
with a clear error that never shows the password, by ``run`` (today: a traceback, "Cannot combine
AUTHORIZATION header with AUTH argument or credentials encoded in URL") and by the proxy (today:
it starts, prints the URL with its password, and answers 500 to every request)."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolbias.cli import main
from toolbias.errors import ProviderError
from toolbias.providers.openai import OpenAIProvider

SECRET = "s3cr3t-PW"
URL = f"http://alice:{SECRET}@127.0.0.1:9/v1"


def test_run_refuses_a_base_url_with_credentials(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["run", "--model", "openai:m", "--base-url", URL, "--variants", "native", "--tasks", "1",
              "--store", str(tmp_path / "s.db")])
    assert exc.value.code == 2
    out = capsys.readouterr()
    assert "credentials" in out.err and "fix:" in out.err and "alice:***@127.0.0.1" in out.err
    assert SECRET not in out.err + out.out and "Traceback" not in out.err


@pytest.mark.parametrize("url", [URL, "http://alice@127.0.0.1:9/v1", f"https://:{SECRET}@example.com/v1"])
def test_the_provider_refuses_credentials_in_any_url(url: str) -> None:
    with pytest.raises(ProviderError) as exc:
        OpenAIProvider("m", base_urls=["http://127.0.0.1:8/v1", url], api_key="k")
    assert "credentials" in exc.value.what and SECRET not in exc.value.render()


def test_the_proxy_refuses_it_before_serving() -> None:
    from toolbias.proxy import ProxyConfig, ProxyServer

    with pytest.raises(ProviderError) as exc:
        ProxyServer(ProxyConfig(upstream=(URL,), variant="native"), host="127.0.0.1", port=0)
    assert SECRET not in exc.value.render()


def test_a_plain_url_still_works() -> None:
    p = OpenAIProvider("m", base_urls=["http://127.0.0.1:9/v1"], api_key="k")
    assert p.base_urls == ("http://127.0.0.1:9/v1",)

"""``toolbias proxy --protocol paper`` against the artifact's own proxy (``toolschema/proxy.py``).

The artifact's proxy runs as its own process (``python -m toolschema.proxy`` from
``../shared/reference/ToolSchemaSpace``; skipped with a reason where absent), toolbias's in this
one; each has its own copy of one deterministic scripted upstream on loopback. A scripted harness
sends both the same requests (its native tools, the native calls it got back, its tool results):
every request each proxy sends upstream must be equal, and every reply to the harness too (but
for toolbias's extra ``proxy.protocol`` field). The scripted agent answers from the request
alone: it calls the variant's tools with valid arguments (reading a transaction's handle and a
listed method from the answers it got), and errs: an off-schema name, arguments that are not
JSON, a dispatcher's wrong operation, values outside a split's interval, wrong case, numbers
as strings, missing arguments.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from tests.support.reference_artifact import ARTIFACT, missing_reason
from tests.support.servers import FakeOpenAIServer, LlamaCppServer, Reply, free_port
from toolbias.proxy import ProxyConfig, ProxyServer
from toolbias.proxy.paper_tools import OPERATORS
from toolbias.variants.codec import Control

pytestmark = pytest.mark.skipif(not (ARTIFACT / "toolschema" / "proxy.py").is_file(),
                                reason=missing_reason(ARTIFACT / "toolschema" / "proxy.py"))


def _fn(name: str, description: str, props: dict[str, Any], required: list[str], **extra: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": props, "required": required, **extra}}}


#: a harness's native tools: classes by prefix, enums, booleans, a prose value set, numbers with and
#: without defaults, an identifier, $ref / anyOf arguments, a tool without arguments
NATIVE_TOOLS = [
    _fn("cabin_set_window", "Open or close a window.", {
        "position": {"type": "string", "enum": ["front_left", "front_right", "rear"], "description": "Which window."},
        "state": {"type": "string", "enum": ["open", "closed"]},
        "speed": {"type": "string", "description": "Motor speed (slow or fast)."}}, ["position", "state", "speed"]),
    _fn("cabin_set_temperature", "Set a zone's temperature.", {
        "zone": {"$ref": "#/$defs/Zone"},
        "degrees": {"type": "number", "default": 21, "description": "Target in Celsius."},
        "unit": {"anyOf": [{"type": "string"}, {"type": "null"}], "description": "Unit, e.g. C."}},
        ["zone", "degrees"], **{"$defs": {"Zone": {"type": "string", "enum": ["driver", "passenger"]}}}),
    _fn("media_play", "Play a track.", {
        "track_id": {"type": "integer"}, "shuffle": {"type": "boolean"},
        "volume": {"type": "integer", "description": "Loudness."},
        "mode": {"type": "string", "description": "Sound profile. Possible values: 'eco', 'sport'."}},
        ["track_id", "shuffle", "volume"]),
    _fn("media_stop", "Stop playback.", {}, []),
    _fn("nav_route", "Plan a route.", {
        "destination": {"type": "string"}, "avoid_tolls": {"type": "boolean"}}, ["destination"]),
]


def _value(schema: Any) -> Any:
    if not isinstance(schema, dict):
        return "x"
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "boolean":
        return True
    if kind in ("integer", "number"):
        if "minimum" in schema:
            return schema["minimum"]
        if "exclusiveMaximum" in schema:
            return schema["exclusiveMaximum"] - 1
        return 5
    if kind == "object":
        return {p: _value(s) for p, s in (schema.get("properties") or {}).items()}
    return "Kitchen"


def _seen(messages: list[dict[str, Any]], key: str) -> Any:
    """The last value of ``key`` in a tool answer the agent got."""
    for m in reversed(messages):
        if m.get("role") == "tool":
            try:
                got = json.loads(m.get("content") or "")
            except ValueError:
                continue
            if isinstance(got, dict) and key in got:
                return got[key]
    return None


def _arguments(tool: dict[str, Any], messages: list[dict[str, Any]]) -> dict[str, Any]:
    params = tool["parameters"]
    props = params.get("properties", {})
    out: dict[str, Any] = {}
    op = props.get("operation", {}).get("enum", [None])[0]
    for p in params.get("required", []):
        out[p] = _seen(messages, "txn_id") if p == "txn_id" else _value(props[p])
    if op is not None:
        out["operation"] = op
        out.update({p: _value(s) for p, s in props.items() if p.startswith(f"{op}::")})
    if tool["name"] == "invoke":
        methods = _seen(messages, "methods") or [{"name": "nothing_listed", "parameters": {}}]
        out["method"] = methods[0]["name"]
        out["arguments"] = {p: _value(s) for p, s in methods[0]["parameters"].get("properties", {}).items()}
    return out


def _protocol_walk(tools: list[dict[str, Any]], messages: list[dict[str, Any]], phase: int) -> list[Any]:
    """A transaction played in order over three steps (begin, every set, commit), or the variant's
    tools two at a time."""
    begins = [t for t in tools if t["name"].startswith("begin_")]
    if not begins:
        return [(t["name"], _arguments(t, messages)) for t in tools[2 * phase:2 * phase + 2]]
    base = begins[0]["name"].removeprefix("begin_")
    if phase == 0:
        return [(begins[0]["name"], {})]
    if phase == 1:
        return [(t["name"], _arguments(t, messages)) for t in tools if t["name"].startswith(f"set_{base}__")]
    return [(f"commit_{base}", {"txn_id": _seen(messages, "txn_id")})] if phase == 2 else []


def scripted_agent(body: dict[str, Any]) -> Reply:
    """The reply to one upstream request, from the request alone."""
    messages = body["messages"]
    tools = [t["function"] for t in body["tools"]]
    user = next(m["content"] for m in messages if m.get("role") == "user")
    scenario = user.split()[1].rstrip(":")
    if scenario == "stuck":  # never a call the variant has: the turn's budget of model calls runs out
        return Reply.calls(("no_such_tool", {"a": 1}))
    step = sum(1 for m in messages if m.get("role") == "assistant")
    first = tools[(step + len(scenario) * 3) % len(tools)]
    valid = _arguments(first, messages)
    if step == 0:
        return Reply.calls((first["name"], valid), ("no_such_tool", {"a": 1}), (first["name"], '{"bad'),
                           content="Let me start.")
    if step == 1:  # wrong case, numbers as strings, null and empty extras
        loose = {k: (v.upper() if isinstance(v, str) and k not in ("operation", "txn_id", "class", "method")
                     else str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v)
                 for k, v in valid.items()}
        return Reply.calls((first["name"], {**loose, "extra_null": None, "extra_empty": ""}))
    if step == 2:  # a wrong operation, and a call missing its arguments
        return Reply.calls((first["name"], {**valid, "operation": "no_such_operation"}), (tools[-1]["name"], {}))
    if step == 3:  # values past every interval, and arguments that are a JSON list
        big = {k: (10 ** 6 if isinstance(v, (int, float)) and not isinstance(v, bool) else v) for k, v in valid.items()}
        return Reply.calls((first["name"], big), (first["name"], "[1, 2]"))
    calls = _protocol_walk(tools, messages, step - 4)
    return Reply.calls(*calls) if calls else Reply.text("All done.")


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(url + "/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            out: dict[str, Any] = json.loads(r.read())
    except urllib.error.HTTPError as exc:
        out = {"http_error": exc.code, "body": json.loads(exc.read() or b"null")}
    return out


def harness(url: str, scenario: str, tools: list[dict[str, Any]], turns: int = 6) -> list[dict[str, Any]]:
    """A harness conversation through a proxy: its replies, in order."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You drive a car."},
                                      {"role": "user", "content": f"Scenario {scenario}: do the chores."}]
    replies = []
    for _ in range(turns):
        reply = _post(url, {"model": "fake-model", "messages": messages, "tools": tools, "temperature": 0,
                            "max_tokens": 256})
        replies.append(reply)
        if "choices" not in reply:
            break
        msg = reply["choices"][0]["message"]
        messages.append({k: v for k, v in msg.items() if k in ("role", "content", "tool_calls")})
        calls = msg.get("tool_calls") or []
        if not calls:
            break
        messages += [{"role": "tool", "tool_call_id": c["id"], "content": f"done: {c['function']['name']}"}
                     for c in calls]
    return replies


class ArtifactProxy:
    """``python -m toolschema.proxy`` in its own process."""

    def __init__(self, op: str, upstream: str, control: str) -> None:
        self.port = free_port()
        env = {**os.environ, "PYTHONPATH": str(ARTIFACT)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "toolschema.proxy", "--op", op, "--upstream", upstream, "--port", str(self.port),
             "--control", control], cwd=str(ARTIFACT), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats", timeout=1).read()
                return
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"the artifact's proxy exited: {self.proc.stderr.read().decode()[-2000:]}"
                                       if self.proc.stderr else "the artifact's proxy exited") from None
                time.sleep(0.1)
        raise RuntimeError("the artifact's proxy did not start")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


class ProxyPairs:
    """Both proxies for one operator and control, each before its own scripted upstream: the pair
    for the last (op, control) asked stays up for the next case that asks for it (starting the
    artifact's proxy is most of a case's time), its upstreams' recorded requests cleared.
    Conversations are keyed by their opening messages and tool names on both sides, so cases that
    share a pair (other tools, other scenarios) never meet each other's conversations."""

    def __init__(self) -> None:
        self._key: tuple[str, Control] | None = None
        self._stack: ExitStack | None = None
        self._pair: tuple[str, str, FakeOpenAIServer, FakeOpenAIServer] | None = None

    def open(self, op: str, control: Control) -> tuple[str, str, FakeOpenAIServer, FakeOpenAIServer]:
        if self._key != (op, control) or self._pair is None:
            self.close()
            with ExitStack() as stack:  # closed here should a part fail to start, else by close()
                theirs_up = stack.enter_context(FakeOpenAIServer(responder=scripted_agent))
                ours_up = stack.enter_context(FakeOpenAIServer(responder=scripted_agent))
                artifact = ArtifactProxy(op, theirs_up.base_url, "hard" if control is Control.STRICT else "loose")
                stack.callback(artifact.close)
                ours = ProxyServer(ProxyConfig(upstream=(ours_up.base_url,), variant=op, protocol="paper",
                                               control=control))
                ours.start()
                stack.callback(ours.stop)
                self._key, self._stack = (op, control), stack.pop_all()
                self._pair = (artifact.url, ours.base_url, theirs_up, ours_up)
        for upstream in self._pair[2:]:
            upstream.requests.clear()
        return self._pair

    def close(self) -> None:
        if self._stack is not None:
            self._stack.close()
        self._key = self._stack = self._pair = None


@pytest.fixture(scope="module")
def pairs() -> Iterator[ProxyPairs]:
    shared = ProxyPairs()
    try:
        yield shared
    finally:
        shared.close()


def _comparable(reply: dict[str, Any]) -> dict[str, Any]:
    out = json.loads(json.dumps(reply))
    if isinstance(out.get("proxy"), dict):
        assert out["proxy"].pop("protocol", "feedback") == "feedback"
    return out


def artifact_catalog(group: str) -> list[dict[str, Any]]:
    """One domain of the artifact's synthetic catalog, as a harness would send its tools."""
    path = ARTIFACT / "benchmarks" / "synthetic" / "data" / "tools.json"
    if not path.is_file():
        pytest.skip(missing_reason(path))
    rows = json.loads(path.read_text())
    return [{"type": "function", "function": {k: t[k] for k in ("name", "description", "parameters")}}
            for t in rows if t["group"] == group]


#: in pair order: the cases of one (op, control) next to each other share one pair of proxies
CASES = [case for op in OPERATORS for case in ((op, Control.STRICT, "harness"), (op, Control.STRICT, "car_cabin"),
                                               *(((op, Control.LENIENT, "harness"),) if op != "disclose" else ()))]


@pytest.mark.parametrize(("op", "control", "catalog"), CASES)
def test_same_requests_and_replies_as_the_artifacts_proxy(pairs: ProxyPairs, op: str, control: Control,
                                                          catalog: str) -> None:
    # (lenient schema discovery is left out: the artifact's proxy fails on an off-schema name there,
    # splitting a native name that has no class)
    tools = NATIVE_TOOLS if catalog == "harness" else artifact_catalog(catalog)
    url_theirs, url_ours, theirs_up, ours_up = pairs.open(op, control)
    for scenario in ("a", "bb", "stuck"):
        theirs = harness(url_theirs, scenario, tools)
        ours = harness(url_ours, scenario, tools)
        assert [_comparable(r) for r in ours] == [_comparable(r) for r in theirs], scenario
    assert len(theirs_up.requests) >= 4
    assert ours_up.requests == theirs_up.requests
    # the variant really differs from the native tools where the operator changes them
    sent = [t["function"]["name"] for t in ours_up.requests[0]["tools"]]
    unchanged = op in ("native", "strip", "reorder", "nest")
    assert (sent == [t["function"]["name"] for t in tools]) == unchanged


def _streamed(url: str, body: dict[str, Any]) -> dict[str, Any]:
    """A streamed reply put back together as a harness does: content, calls by index, finish reason."""
    request = urllib.request.Request(url + "/chat/completions", data=json.dumps({**body, "stream": True}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as r:
        lines = r.read().decode().splitlines()
    content, calls, finish = "", {}, None
    for line in lines:
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        for choice in json.loads(line[6:]).get("choices", []):
            delta = choice.get("delta", {})
            content += delta.get("content") or ""
            for call in delta.get("tool_calls") or []:
                calls.setdefault(call["index"], call)
            finish = choice.get("finish_reason") or finish
    return {"content": content, "tool_calls": [{k: v for k, v in calls[i].items() if k != "index"}
                                               for i in sorted(calls)], "finish_reason": finish}


@pytest.mark.parametrize("op", ["transaction", "merge"])
def test_a_streamed_turn_reads_the_same(pairs: ProxyPairs, op: str) -> None:
    url_theirs, url_ours, theirs_up, ours_up = pairs.open(op, Control.STRICT)
    body = {"model": "fake-model", "tools": NATIVE_TOOLS, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "Scenario a: do the chores."}]}
    theirs, ours = _streamed(url_theirs, body), _streamed(url_ours, body)
    assert ours == theirs and ours["tool_calls"]
    assert ours_up.requests == theirs_up.requests and "stream" not in ours_up.requests[0]


@pytest.mark.slow
def test_a_real_model_behind_both_proxies(llama_server: LlamaCppServer) -> None:
    """The embedded model behind ``python -m llama_cpp.server`` as the upstream of both proxies
    (through a relay that records each request): the same requests, the same replies."""
    llama = llama_server

    def relay(body: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = _post(llama.base_url, {**body, "model": llama.model})
        out.update(model="fake-model", id="chatcmpl-relay", created=0)  # the server's own, per response
        return out

    with FakeOpenAIServer(responder=relay) as theirs_up, FakeOpenAIServer(responder=relay) as ours_up:
        artifact = ArtifactProxy("merge", theirs_up.base_url, "hard")
        ours = ProxyServer(ProxyConfig(upstream=(ours_up.base_url,), variant="merge", protocol="paper")).start()
        try:
            body = {"model": "fake-model", "tools": NATIVE_TOOLS, "temperature": 0, "max_tokens": 64,
                    "messages": [{"role": "system", "content": "You drive a car."},
                                 {"role": "user", "content": "Stop the music."}]}
            theirs, mine = _post(artifact.url, body), _post(ours.base_url, body)
        finally:
            ours.stop()
            artifact.close()
    assert "choices" in theirs, theirs
    assert _comparable(mine) == _comparable(theirs)
    assert ours_up.requests == theirs_up.requests and len(ours_up.requests) >= 1

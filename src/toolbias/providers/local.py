"""The embedded model: llama.cpp in-process through ``llama-cpp-python``; no server, no key.

``local`` runs the default weights (Qwen2.5-Coder-0.5B-Instruct Q4_K_M, see
:mod:`.weights`); ``local:/path/to/model.gguf`` runs any GGUF, and so does ``local``
when the environment variable ``TOOLBIAS_LOCAL_GGUF`` names one. Needs the optional
extra: ``pip install 'toolbias[local]'``.

How a turn is produced:

- The prompt is the GGUF's own chat template (``tokenizer.chat_template`` in the
  model metadata, or the ``chat_template`` option) rendered with Jinja2 in a
  sandbox, with ``tools=`` the variant's tools: what the model was trained on.
  llama-cpp-python's chat handlers are not used for tools.
- Generation is plain completion on the rendered tokens; the answer's
  ``<tool_call>`` blocks are parsed leniently by :mod:`.textcalls`. Calls in the
  template's own format are the model's native interface (``recovered=False``);
  calls found only as bare or fenced JSON are marked ``recovered=True``.
- ``tool_choice="required"`` constrains decoding with a GBNF grammar: one or more
  ``<tool_call>`` blocks naming one of the offered tools with a JSON object of
  arguments. ``"none"`` leaves any calls in the text.
- KV-cache reuse: llama.cpp keeps the previous request's tokens, and a new prompt
  that starts with the same tokens evaluates only its new suffix. Rendering puts
  the system prompt and tools first, so consecutive episodes of one variant and
  domain share that prefix, and later turns of one episode share the whole
  earlier conversation. The reused count is reported in
  ``Usage.cached_prompt_tokens``. On top, a small LRU of saved KV states keyed by
  the system+tools prefix (``prefix_states`` option, default 4) restores a prefix
  when requests from different domains interleave. On the batched path, evaluated
  system+tools prefixes are also saved on disk (:mod:`.kv_prefixes`; ``kv_cache`` option or
  ``TOOLBIAS_KV_CACHE``: a folder, or ``off``), so a later run of the same study loads
  them instead of evaluating them again.
- Batching (the default, ``batch`` option 16): requests from concurrent episodes decode
  together in one llama.cpp context, one decoding thread, the sequences sharing their
  prompt prefix in the KV cache (:mod:`.llama_batch`); ``max_concurrency`` is ``batch``, so a
  study plays that many episodes at once. ``batch=1`` (or ``TOOLBIAS_LOCAL_BATCH=1``) is the
  one-sequence path: one request at a time through ``create_completion`` in a worker thread
  behind a lock, with the saved prefix states above. Both give the same answers up to
  floating-point differences of batched matrix products; ``batch`` is not part of the
  settings (an operational knob, like a server's concurrency).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from ..errors import MissingExtraError, ProviderError
from .base import GenerateConfig, InfraError, Message, ModelAPI, ModelOutput, ToolCall, Usage
from .kv_prefixes import PrefixStore, folder_for, prefix_key
from .llama_batch import BatchDecoder, BatchResult, DecoderStats, Sampling
from .textcalls import find_tool_calls
from .weights import (
    DEFAULT_GGUF_ENV,
    DEFAULT_SHA256,
    check_gguf,
    default_model_path,
    sha256_file,
    verify_file,
)

#: used when a GGUF carries no chat template: ChatML with Hermes-style tools (Qwen's format)
FALLBACK_TEMPLATE = """\
{%- if tools %}<|im_start|>system
{% if messages[0].role == 'system' %}{{ messages[0].content }}{% else %}You are a helpful assistant.{% endif %}

# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}
</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> \
XML tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call><|im_end|>
{% elif messages[0].role == 'system' %}<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif %}
{%- for message in messages %}
{%- if message.role == 'system' and loop.first %}
{%- elif message.role == 'assistant' and message.tool_calls %}<|im_start|>assistant
{% if message.content %}{{ message.content }}
{% endif %}
{%- for tc in message.tool_calls %}<tool_call>
{"name": "{{ tc.function.name }}", "arguments": {{ tc.function.arguments | tojson }}}
</tool_call>
{% endfor %}<|im_end|>
{% elif message.role == 'tool' %}<|im_start|>user
<tool_response>
{{ message.content }}
</tool_response><|im_end|>
{% else %}<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""

_STOP = ["<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end|>"]
#: requests decoded at once unless the ``batch`` option says otherwise (1: the one-sequence path)
DEFAULT_BATCH = 16
#: the environment variable that sets ``batch`` when the option is not given
BATCH_ENV = "TOOLBIAS_LOCAL_BATCH"


def _usable_cores() -> int:
    """The cores this process may run on (taskset, containers), not the machine's count: a thread
    per core it cannot use would wait at every llama.cpp barrier."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # no affinity API (macOS)
        return os.cpu_count() or 1


def _batch_size(value: int | str | None) -> int:
    """The ``batch`` option, else :data:`BATCH_ENV`, else :data:`DEFAULT_BATCH`."""
    source = "the batch option"
    if value is None or value == "":
        value, source = os.environ.get(BATCH_ENV, "").strip() or DEFAULT_BATCH, BATCH_ENV
    try:
        n = int(value)
    except (TypeError, ValueError):
        n = 0
    if n < 1:
        raise ProviderError(f"{source} must be a whole number >= 1, got {value!r}",
                            fix="e.g. batch=8 (requests decoded at once) or 1 for the one-sequence path")
    return n


#: llama.cpp's CPU threads meet at a barrier after every operation of a decode (OpenMP builds, the
#: default wheel); spinning there while another process holds the core the other thread needs cost
#: 344 CPU-ms per token against 45 when sleeping (2 threads, load average 6 on 2 cores). Set before
#: llama.cpp loads, unless the user set it.
OMP_DEFAULTS = {"OMP_WAIT_POLICY": "PASSIVE"}


def _import_llama() -> Any:
    for name, value in OMP_DEFAULTS.items():
        os.environ.setdefault(name, value)
    try:
        import llama_cpp
    except ImportError:
        raise MissingExtraError("llama-cpp-python", "local", "The embedded model") from None
    return llama_cpp


# ------------------------------------------------------------------ chat template


class ChatTemplate:
    """A model's Jinja2 chat template, rendered the way Hugging Face ``apply_chat_template`` does."""

    def __init__(self, source: str, *, bos_token: str = "", eos_token: str = "") -> None:
        try:
            import jinja2
            from jinja2.ext import loopcontrols
            from jinja2.sandbox import ImmutableSandboxedEnvironment
        except ImportError:
            raise MissingExtraError("jinja2", "local", "Rendering the embedded model's chat template") from None

        def raise_exception(message: str) -> None:
            raise jinja2.TemplateError(message)

        def tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None,
                   separators: Any = None, sort_keys: bool = False) -> str:
            return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                              sort_keys=sort_keys)

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
        env.filters["tojson"] = tojson
        env.globals["raise_exception"] = raise_exception
        env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
        self.source = source
        self.sha256 = hashlib.sha256(source.encode("utf-8")).hexdigest()
        self._template = env.from_string(source)
        self._error = jinja2.TemplateError
        self.bos_token, self.eos_token = bos_token, eos_token

    def render(self, messages: list[Message], tools: list[dict[str, Any]] | None,
               add_generation_prompt: bool = True) -> str:
        try:
            return self._template.render(messages=[_template_message(m) for m in messages],
                                         tools=[_template_tool(t) for t in tools] if tools else None,
                                         add_generation_prompt=add_generation_prompt,
                                         bos_token=self.bos_token, eos_token=self.eos_token)
        except self._error as exc:
            raise ProviderError(f"the model's chat template failed to render: {exc}",
                                fix="pass a working template with the chat_template option") from None


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return json.dumps(content, ensure_ascii=False)


def _template_message(m: Message) -> dict[str, Any]:
    """OpenAI chat message -> the shape HF templates expect (content a string, arguments an object)."""
    out = dict(m)
    out["content"] = _text(m.get("content"))
    if m.get("tool_calls"):
        calls = []
        for tc in m["tool_calls"]:
            fn = dict(tc.get("function") or tc)
            args = fn.get("arguments")
            if isinstance(args, str):
                try:
                    parsed = json.loads(args) if args.strip() else {}
                    fn["arguments"] = parsed if isinstance(parsed, dict) else args
                except ValueError:
                    fn["arguments"] = args
            calls.append({"id": tc.get("id", ""), "type": "function", "function": fn})
        out["tool_calls"] = calls
    return out


def _template_tool(t: dict[str, Any]) -> dict[str, Any]:
    return t if "function" in t else {"type": "function", "function": t}


# ------------------------------------------------------------------ grammar for tool_choice="required"

def _gbnf_literal(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _strict(schema: Any) -> Any:
    """``schema`` with ``additionalProperties: false`` on every object that lists properties and
    does not say otherwise: what vLLM's guided decoding (xgrammar's strict mode) does for
    ``tool_choice="required"``, so a constrained call cannot invent an argument."""
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("properties", "patternProperties", "$defs", "definitions") and isinstance(value, dict):
            out[key] = {name: _strict(sub) for name, sub in value.items()}  # names, not keywords
        elif key in ("enum", "const", "default", "examples"):
            out[key] = value  # data
        else:
            out[key] = _strict(value)
    if "properties" in out and "additionalProperties" not in out and out.get("type", "object") == "object":
        out["additionalProperties"] = False
    return out


def _parameters(tool: dict[str, Any]) -> dict[str, Any]:
    params = (tool.get("function") or tool).get("parameters")
    return params if isinstance(params, dict) and params else {"type": "object", "properties": {}}


def required_call_grammar(tools: list[dict[str, Any]]) -> str:
    """GBNF: one or more Hermes ``<tool_call>`` blocks, each naming one of ``tools`` with
    arguments that match that tool's JSON schema, strictly (no argument the schema does not
    define), as ``tool_choice="required"`` does on vLLM. Rules come from llama-cpp-python's
    JSON-schema converter; a schema it cannot express is a ProviderError naming the tool."""
    _import_llama()
    from llama_cpp.llama_grammar import SchemaConverter

    converter = SchemaConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    alternatives = []
    for i, tool in enumerate(tools):
        name = str((tool.get("function") or tool).get("name", ""))
        try:
            schema = converter.resolve_refs(_strict(_parameters(tool)), f"tool{i}")
            rule = converter.visit(schema, f"args{i}")
        except Exception as exc:  # noqa: BLE001 - the converter raises bare exceptions: say which tool
            raise ProviderError(f"cannot build a decoding grammar for the arguments of tool '{name}': {exc}",
                                fix="simplify that tool's JSON schema, or run without --condition required"
                                ) from None
        head = json.dumps(name) + ', "arguments": '
        alternatives.append(f"{_gbnf_literal(head)} {rule}")
    named = " | ".join(alternatives) or _gbnf_literal('""')
    return ('root ::= call ( "\\n" call )*\n'
            'call ::= "<tool_call>\\n{\\"name\\": " named "}\\n</tool_call>"\n'
            f"named ::= {named}\n" + converter.format_grammar() + "\n")


# ------------------------------------------------------------------ provider


@dataclass
class LocalStats:
    """Where a LocalProvider's time went (seconds, summed over requests)."""

    requests: int = 0
    #: llama.cpp: prompt evaluation and generation (create_completion)
    engine_s: float = 0.0
    #: toolbias's own work: template rendering, tokenising, prefix lookup, parsing calls
    harness_s: float = 0.0
    #: saving/restoring KV prefix states
    state_s: float = 0.0


class LocalProvider(ModelAPI):
    """The embedded llama.cpp model (``local`` or ``local:/path/to/model.gguf``).

    Options: ``n_ctx`` (context window, default 8192), ``n_threads`` (default: the cores
    this process may use), ``n_batch`` (512), ``chat_template`` (override the GGUF's), ``sha256``
    (verify a custom GGUF), ``prefix_states`` (saved KV prefixes, default 4, 0 = off),
    ``flash_attn`` (default on: about 20% faster prompt processing on CPU, measured 62 -> 76
    tokens/s on 2 cores), ``batch`` (requests decoded at once, default 16 or ``TOOLBIAS_LOCAL_BATCH``;
    1: the one-sequence path), ``kv_cache`` (where evaluated prompt prefixes are kept across runs,
    or ``off``; default ``TOOLBIAS_KV_CACHE``, else ``kv/`` in toolbias's cache folder),
    ``verbose`` (llama.cpp logs). With ``batch`` > 1 the KV cache
    holds ``2 * n_ctx`` tokens shared by ``batch + prefix_states`` sequences.
    """

    cacheable = True

    def __init__(self, arg: str = "", *, n_ctx: int = 8192, n_threads: int | None = None, n_batch: int = 512,
                 chat_template: str | None = None, sha256: str | None = None, prefix_states: int = 4,
                 flash_attn: bool = True, batch: int | str | None = None, kv_cache: str | None = None,
                 verbose: bool = False, **options: Any) -> None:
        if options:
            raise ProviderError(f"unknown option(s) for the local model: {', '.join(sorted(options))}",
                                fix="use n_ctx, n_threads, n_batch, chat_template, sha256, prefix_states, "
                                    "flash_attn, batch, kv_cache, verbose")
        self.batch = _batch_size(batch)
        self.kv_cache = kv_cache
        #: episodes worth running at once: the batch (1: one after another in plan order, variant by
        #: variant, domain by domain, so the prompt prefix stays in the KV cache)
        self.max_concurrency = self.batch
        self._decoder: BatchDecoder | None = None
        #: ``local`` with TOOLBIAS_LOCAL_GGUF set runs that file, exactly as ``local:PATH`` would
        self.path_arg = arg.strip() or os.environ.get(DEFAULT_GGUF_ENV, "").strip() or None
        self.spec = f"local:{self.path_arg}" if self.path_arg else "local"
        self.base_url = None
        self.n_ctx, self.n_threads, self.n_batch = n_ctx, n_threads, n_batch
        self.chat_template_override = chat_template
        self.expected_sha256 = sha256.lower() if sha256 else (None if self.path_arg else DEFAULT_SHA256)
        self.verbose = verbose
        self.flash_attn = bool(flash_attn)
        self.max_prefix_states = max(0, prefix_states)
        self.model_path: Path | None = None
        self.load_s: float | None = None
        self._llm: Any = None
        self._template: ChatTemplate | None = None
        self._grammars: dict[str, Any] = {}
        self._states: OrderedDict[tuple[int, ...], bytes] = OrderedDict()
        self._prefixes: dict[str, tuple[int, ...]] = {}
        self.stats = LocalStats()
        self._file_sha: str | None = None
        self._lock = threading.Lock()
        #: one asyncio lock per event loop (requests queue there, not in the thread pool)
        self._alocks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = \
            weakref.WeakKeyDictionary()
        _import_llama()  # fail early with the install hint

    # -- identity -------------------------------------------------------------

    def settings(self) -> dict[str, Any]:
        s: dict[str, Any] = {"spec": self.spec, "model_sha256": self._model_sha256(), "engine": "llama.cpp",
                             "required": "grammar", "flash_attn": self.flash_attn}
        if self.chat_template_override:
            s["chat_template_sha256"] = hashlib.sha256(self.chat_template_override.encode()).hexdigest()
        return s

    def _model_sha256(self) -> str:
        if self.expected_sha256:
            return self.expected_sha256
        if self._file_sha is None:
            self._file_sha = sha256_file(self._resolve_path())
        return self._file_sha

    # -- loading --------------------------------------------------------------

    def _resolve_path(self) -> Path:
        if self.model_path is None:
            if self.path_arg:
                path = check_gguf(self.path_arg)
                if self.expected_sha256:
                    verify_file(path, self.expected_sha256)
            else:
                path = default_model_path()  # assembled and verified
            self.model_path = path
        return self.model_path

    def _load(self) -> Any:
        """Load the model once (call with the lock held)."""
        if self._llm is not None:
            return self._llm
        llama_cpp = _import_llama()
        path = self._resolve_path()
        if self.expected_sha256:  # re-verify right before loading (memoised per file stat)
            verify_file(path, self.expected_sha256)
        t0 = time.perf_counter()
        threads = self.n_threads or _usable_cores()
        batched = self.batch > 1
        try:  # batched: the Llama object's own context is unused (the decoder has its own), so it is small
            llm = llama_cpp.Llama(model_path=str(path), n_ctx=256 if batched else self.n_ctx,
                                  n_batch=min(self.n_batch, 256) if batched else self.n_batch,
                                  n_threads=threads, n_threads_batch=threads, flash_attn=self.flash_attn,
                                  verbose=self.verbose)
            if batched:
                self._decoder = BatchDecoder(llm, batch=self.batch, slots=self.batch + self.max_prefix_states,
                                             kv_cells=2 * self.n_ctx, n_batch=self.n_batch, n_threads=threads,
                                             flash_attn=self.flash_attn, stop=_STOP,
                                             prefixes=self._prefix_store(path, llama_cpp.__version__))
        except (ValueError, RuntimeError, OSError) as exc:
            raise ProviderError(f"llama.cpp could not load {path}: {exc}",
                                fix="check that the file is a complete GGUF model llama.cpp supports") from None
        self.load_s = time.perf_counter() - t0
        source = self.chat_template_override or llm.metadata.get("tokenizer.chat_template") or FALLBACK_TEMPLATE

        def token_text(tid: int) -> str:
            return str(llm._model.token_get_text(tid)) if tid >= 0 else ""

        self._template = ChatTemplate(source, bos_token=token_text(llm.token_bos()),
                                      eos_token=token_text(llm.token_eos()))
        self._llm = llm
        return llm

    def _prefix_store(self, path: Path, engine: str) -> PrefixStore | None:
        """Where this model's evaluated prefixes are kept across runs (None: ``kv_cache`` off)."""
        folder = folder_for(self.kv_cache)
        if folder is None:
            return None
        st = path.stat()  # a custom GGUF without a pinned hash: its name, size and time stand in
        model = self.expected_sha256 or f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"
        return PrefixStore(folder, prefix_key(model, f"llama-cpp-python {engine}", self.flash_attn))

    async def check(self) -> None:
        await asyncio.to_thread(self._load_locked)

    def _load_locked(self) -> None:
        with self._lock:
            self._load()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    def close(self) -> None:
        """Free the model's memory (a later request loads it again)."""
        with self._lock:
            if self._decoder is not None:
                self._decoder.close()
                self._decoder = None
            if self._llm is not None:
                close = getattr(self._llm, "close", None)
                if close:
                    close()
                self._llm = None
            self._states.clear()
            self._prefixes.clear()

    # -- generation -----------------------------------------------------------

    async def generate(self, messages: list[Message], tools: list[dict[str, Any]], tool_choice: str | None,
                       config: GenerateConfig) -> ModelOutput:
        if self.batch > 1:  # the decoding thread batches; rendering and tokenising run beside it
            t0 = time.perf_counter()
            tokens, max_tokens, sampling = await asyncio.to_thread(self._prepare, messages, tools, tool_choice,
                                                                   config)
            assert self._decoder is not None
            keep = self._stored_prefix(messages, tools, tokens)
            result = await asyncio.wrap_future(self._decoder.submit(tokens, max_tokens, sampling, keep))
            return self._batched_output(result, tokens, tools, tool_choice, t0)
        loop = asyncio.get_running_loop()
        alock = self._alocks.get(loop)
        if alock is None:
            alock = self._alocks[loop] = asyncio.Lock()
        async with alock:  # queue here, not in the thread pool
            return await asyncio.to_thread(self.generate_sync, messages, tools, tool_choice, config)

    def render(self, messages: list[Message], tools: list[dict[str, Any]]) -> str:
        """The prompt text the model sees (loads the model for its template)."""
        with self._lock:
            self._load()
        assert self._template is not None
        return self._template.render(messages, tools or None)

    def generate_sync(self, messages: list[Message], tools: list[dict[str, Any]], tool_choice: str | None,
                      config: GenerateConfig, *, reuse_prefix: bool = True) -> ModelOutput:
        """One completion, blocking. ``reuse_prefix=False`` drops the KV cache first (benchmarks of
        the one-sequence path; the batched path ignores it)."""
        if self.batch > 1:
            t0 = time.perf_counter()
            tokens, max_tokens, sampling = self._prepare(messages, tools, tool_choice, config)
            assert self._decoder is not None
            keep = self._stored_prefix(messages, tools, tokens)
            result = self._decoder.submit(tokens, max_tokens, sampling, keep).result()
            return self._batched_output(result, tokens, tools, tool_choice, t0)
        with self._lock:
            llm = self._load()
            assert self._template is not None
            t0 = time.perf_counter()
            prompt = self._template.render(messages, tools or None)
            tokens = llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
            if len(tokens) >= self.n_ctx:
                raise InfraError(f"the prompt has {len(tokens)} tokens, more than the local model's context "
                                 f"window n_ctx={self.n_ctx}; pass a larger n_ctx", retryable=False)
            prefix = self._prefix_tokens(llm, messages, tools) if self.max_prefix_states else ()
            restore_s = 0.0
            if not reuse_prefix:
                llm.reset()
                self._states.clear()
            else:
                ts = time.perf_counter()
                self._restore_prefix(llm, tokens, prefix)
                restore_s = time.perf_counter() - ts
            reused = self._reusable(llm, tokens)
            grammar = None
            if tool_choice == "required" and tools:
                grammar = self._grammar(tools)
            max_tokens = max(1, min(config.max_tokens, self.n_ctx - len(tokens)))
            t1 = time.perf_counter()
            try:
                result = llm.create_completion(
                    tokens, max_tokens=max_tokens, temperature=config.temperature,
                    top_p=1.0 if config.top_p is None else config.top_p, seed=config.seed, stop=_STOP,
                    grammar=grammar, repeat_penalty=1.0,
                )
            except (RuntimeError, ValueError) as exc:  # llama_decode failures, context overflow
                llm.reset()
                raise InfraError(f"llama.cpp failed to generate: {exc}", retryable=False) from None
            t2 = time.perf_counter()
            if reuse_prefix:
                self._save_prefix(llm, tokens, prefix)
            t3 = time.perf_counter()
        text: str = result["choices"][0]["text"]
        usage = result.get("usage") or {}
        out_usage = Usage(prompt_tokens=len(tokens), completion_tokens=int(usage.get("completion_tokens", 0)),
                          cached_prompt_tokens=reused)
        out = self._to_output(text, tools, tool_choice, out_usage, 0.0)
        t4 = time.perf_counter()
        self.stats.requests += 1
        self.stats.engine_s += t2 - t1
        self.stats.harness_s += (t1 - t0 - restore_s) + (t4 - t3)
        self.stats.state_s += restore_s + (t3 - t2)
        return replace(out, latency_s=t4 - t0)

    def _prepare(self, messages: list[Message], tools: list[dict[str, Any]], tool_choice: str | None,
                 config: GenerateConfig) -> tuple[list[int], int, Sampling]:
        """The batched path's request: prompt tokens, the most tokens to generate, how to sample."""
        t0 = time.perf_counter()
        with self._lock:
            llm = self._load()
            grammar = self._grammar(tools) if tool_choice == "required" and tools else None
        assert self._template is not None
        prompt = self._template.render(messages, tools or None)
        tokens: list[int] = llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
        if len(tokens) >= self.n_ctx:
            raise InfraError(f"the prompt has {len(tokens)} tokens, more than the local model's context "
                             f"window n_ctx={self.n_ctx}; pass a larger n_ctx", retryable=False)
        sampling = Sampling(temperature=config.temperature, top_p=1.0 if config.top_p is None else config.top_p,
                            seed=0 if config.seed is None else config.seed,
                            grammar=(grammar._grammar, grammar._root) if grammar is not None else None)
        self.stats.harness_s += time.perf_counter() - t0
        return tokens, max(1, min(config.max_tokens, self.n_ctx - len(tokens))), sampling

    def _stored_prefix(self, messages: list[Message], tools: list[dict[str, Any]], tokens: list[int]) -> int:
        """How many leading ``tokens`` are the system+tools prefix the decoder may keep on disk (0: none)."""
        if self._decoder is None or self._decoder.prefixes is None:
            return 0
        with self._lock:
            prefix = self._prefix_tokens(self._llm, messages, tools)
        return len(prefix) if tuple(tokens[: len(prefix)]) == prefix else 0

    def _batched_output(self, result: BatchResult, tokens: list[int], tools: list[dict[str, Any]],
                        tool_choice: str | None, t0: float) -> ModelOutput:
        t1 = time.perf_counter()
        usage = Usage(prompt_tokens=len(tokens), completion_tokens=result.completion_tokens,
                      cached_prompt_tokens=result.cached_prompt_tokens)
        out = self._to_output(result.text, tools, tool_choice, usage, 0.0)
        t2 = time.perf_counter()
        self.stats.requests += 1
        self.stats.harness_s += t2 - t1
        return replace(out, latency_s=t2 - t0)

    def decoder_stats(self) -> DecoderStats | None:
        """The batched path's counters (None on the one-sequence path or before loading)."""
        return self._decoder.stats if self._decoder is not None else None

    @staticmethod
    def _to_output(text: str, tools: list[dict[str, Any]], tool_choice: str | None, usage: Usage,
                   latency: float) -> ModelOutput:
        calls: tuple[ToolCall, ...] = ()
        content: str | None = text
        recovered = False
        if tools and tool_choice != "none":
            found = find_tool_calls(text)
            if found.calls:
                calls = tuple(found.calls)
                content = found.remaining or None
                recovered = any(f != "hermes" for f in found.formats)
        return ModelOutput(content=content, tool_calls=calls, usage=usage, latency_s=latency, recovered=recovered,
                           raw_content=text if recovered else None)

    def _grammar(self, tools: list[dict[str, Any]]) -> Any:
        """The compiled grammar for ``tools`` (cached: a variant's episodes share their tools)."""
        key = hashlib.sha256(json.dumps(tools, sort_keys=True, default=str).encode()).hexdigest()
        g = self._grammars.get(key)
        if g is None:
            llama_cpp = _import_llama()
            g = self._grammars[key] = llama_cpp.LlamaGrammar.from_string(required_call_grammar(tools),
                                                                         verbose=self.verbose)
            if len(self._grammars) > 64:
                self._grammars.pop(next(iter(self._grammars)))
        return g

    # -- KV prefix reuse --------------------------------------------------------

    @staticmethod
    def _reusable(llm: Any, tokens: list[int]) -> int:
        """How many prompt tokens llama.cpp will take from its KV cache instead of evaluating."""
        n = 0
        for a, b in zip(llm.input_ids[: llm.n_tokens].tolist(), tokens, strict=False):
            if a != b:
                break
            n += 1
        return min(n, len(tokens) - 1)

    def _prefix_tokens(self, llm: Any, messages: list[Message], tools: list[dict[str, Any]]) -> tuple[int, ...]:
        """The tokens of the system message + tools part of the prompt (the part episodes share)."""
        assert self._template is not None
        head = [m for m in messages[:1] if m.get("role") == "system"]
        key = json.dumps([head, tools], sort_keys=True, default=str)
        cached = self._prefixes.get(key)
        if cached is not None:
            return cached
        probe = head + [{"role": "user", "content": "\x00"}]
        text = self._template.render(probe, tools or None, add_generation_prompt=False)
        cut = text.find("\x00")
        prefix_text = text[:cut] if cut > 0 else ""
        # stop at the last special-token boundary so tokenisation matches the full prompt's
        boundary = prefix_text.rfind("<|im_start|>")
        if boundary > 0:
            prefix_text = prefix_text[:boundary]
        prefix = tuple(llm.tokenize(prefix_text.encode("utf-8"), add_bos=False, special=True)) if prefix_text else ()
        self._prefixes[key] = prefix
        if len(self._prefixes) > 64:
            self._prefixes.pop(next(iter(self._prefixes)))
        return prefix

    def _restore_prefix(self, llm: Any, tokens: list[int], prefix: tuple[int, ...]) -> None:
        if not self.max_prefix_states:
            return
        if len(prefix) < 32 or tuple(tokens[: len(prefix)]) != prefix:
            return
        if self._reusable(llm, tokens) >= len(prefix) - 1:
            return  # the live cache already holds it
        state = self._states.get(prefix)
        if state is None:
            return
        self._states.move_to_end(prefix)
        try:
            _load_kv(llm, state, prefix)
        except Exception:  # noqa: BLE001 - an optimisation only: fall back to a full evaluation
            llm.reset()
            self.max_prefix_states = 0
            self._states.clear()

    def _save_prefix(self, llm: Any, tokens: list[int], prefix: tuple[int, ...]) -> None:
        if not self.max_prefix_states:
            return
        if (len(prefix) < 32 or prefix in self._states or tuple(tokens[: len(prefix)]) != prefix
                or llm.n_tokens < len(prefix)):
            return
        try:
            self._states[prefix] = _save_kv(llm)
        except Exception:  # noqa: BLE001 - an optimisation only
            self.max_prefix_states = 0
            self._states.clear()
            return
        while len(self._states) > self.max_prefix_states:
            self._states.popitem(last=False)


def _save_kv(llm: Any) -> bytes:
    """The context's KV state (without llama-cpp-python's logits copy, which can be hundreds of MB)."""
    import ctypes

    llama_cpp = _import_llama()
    size = int(llama_cpp.llama_state_get_size(llm._ctx.ctx))
    buf = (ctypes.c_uint8 * size)()
    n = int(llama_cpp.llama_state_get_data(llm._ctx.ctx, buf, size))
    if n <= 0 or n > size:
        raise RuntimeError("llama_state_get_data failed")
    return bytes(buf)[:n]


def _load_kv(llm: Any, state: bytes, prefix: tuple[int, ...]) -> None:
    """Restore a state saved by :func:`_save_kv` whose tokens start with ``prefix``; keep only those."""
    import ctypes

    llama_cpp = _import_llama()
    buf = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
    if int(llama_cpp.llama_state_set_data(llm._ctx.ctx, buf, len(state))) != len(state):
        raise RuntimeError("llama_state_set_data failed")
    n_prefix = len(prefix)
    llm.input_ids[:n_prefix] = prefix
    llm.n_tokens = n_prefix
    llm._requires_eval = True
    llm._ctx.kv_cache_seq_rm(-1, n_prefix, -1)

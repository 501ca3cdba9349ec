"""Continuous batching for the embedded model: several requests decode at once in one llama.cpp context.

llama.cpp decodes a batch of tokens from several sequences in one pass over the weights, so
on a CPU that is memory-bound at one token per pass, eight sequences cost little more than
one. :class:`BatchDecoder` owns one context with ``slots`` sequences in a unified KV cache
and one decoding thread; callers (any thread, any event loop) :meth:`~BatchDecoder.submit` a
tokenised prompt and get a :class:`concurrent.futures.Future`.

Each step of the decoding thread builds one ``llama_batch``: the next token of every sequence
that is generating, then prompt tokens of newly admitted requests up to ``n_batch`` tokens in
all (a long prompt is evaluated over several steps while the others keep generating), then
one ``llama_decode`` and one sampling per sequence whose logits it asked for.

Prompt reuse: a slot keeps its tokens in the KV cache after its request ends. A new request
takes the slot whose tokens share the longest prefix with its prompt: the same slot when that
one is idle (the next turn of an episode, the next episode of a variant), or a free slot into
which the shared prefix is copied with ``llama_memory_seq_cp`` (in a unified cache the cells
are shared, not duplicated); only the rest of the prompt is evaluated. Idle slots are the
cache of prefixes.

Room in the KV cache: a request is admitted only when the cells it needs (its prompt beyond the
longest cached prefix, plus ``gen_reserve`` tokens to generate) fit beside what the cache holds
(every slot's tokens, shared prefixes counted once, and what running requests still need);
otherwise least recently used idle slots are evicted, and if that is not enough it waits for a
running request to end. Episodes with different long prompts (a catalog's domains) then decode
as many at once as fit, instead of evicting each other's prompts. A request that generates past
its reserve is reserved another ``gen_reserve`` tokens (up to its ``max_tokens``), so admission
keeps counting what it may still fill. One that outgrows it in a full cache still sets the latest
running request back in the queue (it restarts later, from its prompt); admission then holds at
the requests left running until one ends or ``ROOM_RETRY_STEPS`` steps have passed (before: until
one ended, so one long answer could decode alone for a thousand steps while others waited).

Prompt reuse across runs: with a :class:`~.kv_prefixes.PrefixStore`, a request may name how
many of its leading tokens are a prefix worth keeping (a variant's system prompt and tools).
Once that prefix is evaluated its sequence's KV state is saved there (its last prompt chunk ends
exactly at the prefix), and a later request with the same prefix that the cache does not hold
loads it into a free sequence instead of evaluating it.

Sampling is llama-cpp-python's own chain for ``create_completion`` (an optional grammar, then
greedy at temperature 0, else top-k 40, typical 1, top-p, min-p 0.05, temperature, seeded),
and a request stops where ``create_completion`` stops (an end-of-generation token, a stop
string, ``max_tokens``), so the text is what the one-sequence path returns up to floating
point differences of batched matrix products (tested on a sample of prompts).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from .base import InfraError
from .kv_prefixes import MIN_TOKENS, PrefixStore

#: a request's slot keeps at least this many shared tokens to be worth taking over from
#: another prompt (shorter: a fresh slot, so a cached prefix of another variant survives)
MIN_SHARED = 32
#: KV cells held back for each running request's generated tokens when admitting (a tool call
#: is tens of tokens; a longer answer may still fill the cache, which sets a request back)
GEN_RESERVE = 256
#: after a full cache set a request back, admission holds at the requests left running for at most
#: this many steps (or until one ends), then tries again with what the cache holds by then
ROOM_RETRY_STEPS = 64


@dataclass(frozen=True)
class Sampling:
    """How a request's tokens are chosen (``create_completion``'s parameters)."""

    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    #: (GBNF text, root rule) constraining the output, or None
    grammar: tuple[str, str] | None = None


@dataclass(frozen=True)
class BatchResult:
    text: str
    completion_tokens: int
    #: prompt tokens taken from the KV cache instead of evaluated
    cached_prompt_tokens: int


@dataclass
class DecoderStats:
    """Where the decoding thread's time went (seconds and tokens, summed)."""

    steps: int = 0
    #: wall time inside ``llama_decode`` (llama.cpp's threads at work)
    decode_s: float = 0.0
    #: of which in steps that evaluated prompt tokens (with or without generating sequences)
    prompt_decode_s: float = 0.0
    prompt_steps: int = 0
    #: wall time of the steps (building the batch, decoding, sampling, stop checks)
    step_s: float = 0.0
    #: of which sampling and checking for the end of each request
    sample_s: float = 0.0
    #: CPU time of the decoding thread itself (its share of llama.cpp's work plus all its Python)
    thread_cpu_s: float = 0.0
    #: prompt tokens evaluated
    prompt_tokens: int = 0
    #: prompt tokens taken from the KV cache (a slot's own tokens or a prefix copied from another)
    reused_tokens: int = 0
    #: of which loaded from prefixes saved on disk by an earlier run (:mod:`.kv_prefixes`)
    restored_tokens: int = 0
    generated_tokens: int = 0
    #: tokens of generating sequences per step, summed (divide by ``steps`` for the mean batch)
    generating: int = 0
    requests: int = 0
    #: running requests set back in the queue because the KV cache was full
    preempted: int = 0
    evicted: int = 0
    #: decoding steps at which the next request waited because the KV cache had no room for it
    kv_waits: int = 0


@dataclass
class _Request:
    tokens: list[int]
    max_tokens: int
    sampling: Sampling
    future: Future[BatchResult]
    reused: int = 0
    todo: list[int] = field(default_factory=list)
    completion: list[int] = field(default_factory=list)
    next_token: int | None = None
    multibyte_fix: int = 0
    sampler: Any = None
    #: when it was admitted (the latest is the one set back when the cache is full)
    admitted: int = 0
    #: leading tokens worth keeping on disk (0: none), and whether this request saves them
    prefix: int = 0
    save_prefix: bool = False


@dataclass
class _Slot:
    seq: int
    tokens: list[int] = field(default_factory=list)
    request: _Request | None = None
    used: int = 0


def cells_held(token_lists: list[list[int]]) -> int:
    """KV cells that sequences holding these tokens occupy when every shared prefix is stored once
    (the decoder copies prefixes between sequences, so a unified cache shares their cells): the
    size of the lists' prefix tree."""
    total, previous = 0, list[int]()
    for tokens in sorted(token_lists):
        total += len(tokens) - common_prefix(previous, tokens)
        previous = tokens
    return total


def reserve_left(generated: int, max_tokens: int, block: int) -> int:
    """KV cells held for a running request beyond the ``generated`` tokens it has: ``block`` tokens
    at a time (the next block once it has filled the last), never past ``max_tokens``; 0 when
    ``block`` is 0 (nothing held back)."""
    if block <= 0:
        return 0
    return max(0, min(max_tokens, (generated // block + 1) * block) - generated)


def common_prefix(a: list[int], b: list[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share (blocks compared as slices, in C, then one by one)."""
    m = min(len(a), len(b))
    n, step = 0, 256
    while n < m:
        k = min(step, m - n)
        if a[n:n + k] == b[n:n + k]:
            n += k
        elif k > 16:
            step = k // 4
        else:
            while n < m and a[n] == b[n]:
                n += 1
            return n
    return n


class BatchDecoder:
    """One llama.cpp context decoding up to ``batch`` requests at once (see the module doc).

    ``llm`` is a loaded ``llama_cpp.Llama`` (its model, tokenizer and vocabulary are used; its
    own context is not). ``slots``: sequences kept in the KV cache (at least ``batch``; the
    others hold prefixes for later requests); ``kv_cells``: the cache's size in tokens, shared
    by all slots."""

    def __init__(self, llm: Any, *, batch: int, slots: int, kv_cells: int, n_batch: int, n_threads: int,
                 flash_attn: bool, stop: list[str], gen_reserve: int = GEN_RESERVE,
                 prefixes: PrefixStore | None = None) -> None:
        import llama_cpp
        from llama_cpp import _internals

        self._lc = llama_cpp
        self.llm = llm
        self.batch = max(1, batch)
        self.n_batch = max(n_batch, self.batch)
        params = llama_cpp.llama_context_params.from_buffer_copy(llm.context_params)
        params.n_ctx = kv_cells
        params.n_batch = params.n_ubatch = self.n_batch
        params.n_seq_max = max(slots, self.batch)
        params.kv_unified = True
        params.n_threads = params.n_threads_batch = n_threads
        params.flash_attn_type = (llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash_attn
                                  else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED)
        self._ctx = _internals.LlamaContext(model=llm._model, params=params, verbose=llm.verbose)
        self.kv_cells = int(llama_cpp.llama_n_ctx(self._ctx.ctx))
        self.gen_reserve = max(0, gen_reserve)
        self.prefixes = prefixes
        self.n_batch = int(llama_cpp.llama_n_batch(self._ctx.ctx))  # llama.cpp keeps it within the cache
        self._mem = self._ctx.memory
        self._vocab = llm._model.vocab
        self._batch = llama_cpp.llama_batch_init(self.n_batch, 0, 1)
        self._stop = [s.encode("utf-8") for s in stop]
        self._slots = [_Slot(i) for i in range(int(params.n_seq_max))]
        self._pending: deque[_Request] = deque()  # submitted, under the lock
        self._queue: deque[_Request] = deque()  # waiting for a slot, the decoding thread's own
        self._cv = threading.Condition()
        self._closing = False
        self._thread: threading.Thread | None = None
        self._clock = 0
        #: admit no more than this many running requests (lowered after a full cache, reset when one
        #: ends or ROOM_RETRY_STEPS steps later)
        self._room = self.batch
        #: the step at which ``_room`` was last lowered
        self._room_since = 0
        self.stats = DecoderStats()

    # -- callers --------------------------------------------------------------

    def submit(self, tokens: list[int], max_tokens: int, sampling: Sampling, prefix: int = 0) -> Future[BatchResult]:
        """Queue one completion of ``tokens`` (non-empty); the future holds its result or an InfraError.
        ``prefix``: how many leading tokens are worth keeping in the prefix store, if there is one."""
        future: Future[BatchResult] = Future()
        req = _Request(list(tokens), max(1, max_tokens), sampling, future)
        if self.prefixes is not None and MIN_TOKENS <= prefix < len(tokens):
            req.prefix = prefix
        with self._cv:
            if self._closing:
                raise InfraError("the local model was closed", retryable=False)
            self._pending.append(req)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="toolbias-llama-batch", daemon=True)
                self._thread.start()
            self._cv.notify()
        return future

    def close(self) -> None:
        """Stop the decoding thread (requests still queued or running fail) and free the context."""
        with self._cv:
            self._closing = True
            self._cv.notify()
            thread = self._thread
        if thread is not None:
            thread.join()
        if self._batch is not None:
            self._lc.llama_batch_free(self._batch)
            self._batch = None
        self._ctx.close()

    # -- the decoding thread ----------------------------------------------------

    def _running(self) -> list[_Slot]:
        return [s for s in self._slots if s.request is not None]

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._closing and not self._pending and not self._queue and not self._running():
                    self._cv.wait()
                if self._closing:
                    self._fail_all(InfraError("the local model was closed", retryable=False))
                    return
                self._queue.extend(self._pending)
                self._pending.clear()
            self._admit_queued()
            c0, t0 = time.thread_time(), time.perf_counter()
            try:
                self._step()
            except Exception as exc:  # noqa: BLE001 - a failed step fails its requests, never the thread
                self._reset(InfraError(f"llama.cpp failed to generate: {exc}", retryable=False))
            self.stats.step_s += time.perf_counter() - t0
            self.stats.thread_cpu_s += time.thread_time() - c0

    def _fail_all(self, error: Exception) -> None:
        for req in (*self._pending, *self._queue):
            if not req.future.cancelled():
                req.future.set_exception(error)
        self._pending.clear()
        self._queue.clear()
        self._reset(error)

    def _reset(self, error: Exception) -> None:
        """Fail the running requests and empty the cache."""
        for slot in self._slots:
            if slot.request is not None:
                self._free_sampler(slot.request)
                if not slot.request.future.done():  # neither answered nor cancelled
                    slot.request.future.set_exception(error)
            slot.request, slot.tokens = None, []
        self._lc.llama_memory_clear(self._mem, True)
        self._room = self.batch

    def _admit_queued(self) -> None:
        """Admit queued requests in order while there is room (sequences and KV cells), except
        one whose prompt shares a longer prefix with a prompt still being evaluated than with the
        cache: it waits for that prefix (eight episodes starting together evaluate their shared
        prefix once). A request the cache has no room for stops admission: the ones behind it
        wait too, so the queue keeps its order (variant by variant, domain by domain)."""
        waiting: list[_Request] = []
        if self._room < self.batch and self.stats.steps - self._room_since >= ROOM_RETRY_STEPS:
            self._room = self.batch
        while self._queue and len(self._running()) < self._room:
            req = self._queue.popleft()
            if req.future.cancelled():
                continue
            cached = max((common_prefix(s.tokens, req.tokens) for s in self._slots), default=0)
            coming = max((common_prefix(s.request.tokens, req.tokens) for s in self._slots
                          if s.request is not None and s.request.todo), default=0)
            if coming >= cached + MIN_SHARED:
                waiting.append(req)
            elif self._fits(req, cached):
                self._admit(req)
            else:
                self.stats.kv_waits += 1
                self._queue.appendleft(req)
                break
        self._queue.extendleft(reversed(waiting))

    def _cells_wanted(self) -> int:
        """Cells the cache holds, plus those running requests will still fill (the rest of their
        prompts and their generation reserve)."""
        held = cells_held([s.tokens for s in self._slots if s.tokens])
        for slot in self._running():
            req = slot.request
            assert req is not None
            held += len(req.todo) + reserve_left(len(req.completion), req.max_tokens, self.gen_reserve)
        return held

    def _fits(self, req: _Request, cached: int) -> bool:
        """Whether ``req``, ``cached`` of whose prompt tokens the cache holds, fits in the KV cache,
        evicting least recently used idle slots that it does not continue from; always when
        nothing runs (a prompt too long for the whole cache then fails as it would alone)."""
        if not self._running():
            return True
        need = len(req.tokens) - cached + reserve_left(0, req.max_tokens, self.gen_reserve)
        while self._cells_wanted() + need > self.kv_cells:
            idle = [s for s in self._slots if s.request is None and s.tokens
                    and (cached == 0 or common_prefix(s.tokens, req.tokens) < cached)]
            if not idle:
                return False
            victim = min(idle, key=lambda s: s.used)
            self._lc.llama_memory_seq_rm(self._mem, victim.seq, -1, -1)
            victim.tokens = []
            self.stats.evicted += 1
        return True

    def _admit(self, req: _Request) -> None:
        """Give ``req`` a slot, reusing the longest cached prefix of its prompt."""
        limit = len(req.tokens) - 1  # at least one token is evaluated: its logits give the first token
        best, shared = None, 0
        for slot in self._slots:
            n = min(common_prefix(slot.tokens, req.tokens), limit)
            if n > shared or (n == shared and best is not None and best.request is not None and slot.request is None):
                best, shared = slot, n
        saved = None
        if req.prefix > shared and self.prefixes is not None:
            saved = self.prefixes.load(req.tokens[:req.prefix])
        if saved is None and best is not None and best.request is None and shared >= min(MIN_SHARED, limit):
            target = best  # continue the idle slot's own tokens
        else:
            idle = [s for s in self._slots if s.request is None and s is not best]
            if not idle:  # only the best one is idle: take it over
                idle = [s for s in self._slots if s.request is None]
            target = min(idle, key=lambda s: (bool(s.tokens), s.used))
            if target is not best or saved is not None:
                self._lc.llama_memory_seq_rm(self._mem, target.seq, -1, -1)
                target.tokens = []
                if saved is not None and self._load_state(target.seq, saved):
                    target.tokens, shared = req.tokens[:req.prefix], req.prefix
                    self.stats.restored_tokens += shared
                else:
                    if saved is not None and self.prefixes is not None:  # refused: evaluate it again
                        self.prefixes.discard(req.tokens[:req.prefix])
                    if best is not None and best is not target and shared > 0:
                        self._lc.llama_memory_seq_cp(self._mem, best.seq, target.seq, 0, shared)
                        target.tokens = best.tokens[:shared]
                    else:
                        shared = 0
        req.save_prefix = (req.prefix > shared and self.prefixes is not None
                           and not self.prefixes.has(req.tokens[:req.prefix]))
        self._lc.llama_memory_seq_rm(self._mem, target.seq, shared, -1)
        target.tokens = target.tokens[:shared]
        req.reused = shared
        self.stats.reused_tokens += shared
        req.todo = req.tokens[shared:]
        req.sampler = self._make_sampler(req.sampling)
        self._clock += 1
        req.admitted = self._clock
        target.request = req
        self.stats.requests += 1

    def _load_state(self, seq: int, data: bytes) -> bool:
        """Load a saved prefix into the (empty) sequence ``seq``; False if llama.cpp refuses it."""
        import ctypes

        buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        if int(self._lc.llama_state_seq_set_data(self._ctx.ctx, buf, len(data), seq)) == 0:
            self._lc.llama_memory_seq_rm(self._mem, seq, -1, -1)
            return False
        return True

    def _save_state(self, slot: _Slot, req: _Request) -> None:
        """Save the sequence of ``slot``, which holds exactly the request's prefix, to the store."""
        import ctypes

        req.save_prefix = False
        assert self.prefixes is not None
        size = int(self._lc.llama_state_seq_get_size(self._ctx.ctx, slot.seq))
        buf = (ctypes.c_uint8 * size)()
        n = int(self._lc.llama_state_seq_get_data(self._ctx.ctx, buf, size, slot.seq))
        if 0 < n <= size:
            self.prefixes.save(slot.tokens, bytes(buf)[:n])

    def _make_sampler(self, s: Sampling) -> Any:
        lc = self._lc
        chain = lc.llama_sampler_chain_init(lc.llama_sampler_chain_default_params())
        if s.grammar is not None:
            gbnf, root = s.grammar
            lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_grammar(self._vocab, gbnf.encode("utf-8"),
                                                                            root.encode("utf-8")))
        if s.temperature < 0:
            lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_dist(s.seed))
        elif s.temperature == 0:
            lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_greedy())
        else:
            for sampler in (lc.llama_sampler_init_top_k(40), lc.llama_sampler_init_typical(1.0, 1),
                            lc.llama_sampler_init_top_p(s.top_p, 1), lc.llama_sampler_init_min_p(0.05, 1),
                            lc.llama_sampler_init_temp(s.temperature), lc.llama_sampler_init_dist(s.seed)):
                lc.llama_sampler_chain_add(chain, sampler)
        return chain

    def _free_sampler(self, req: _Request) -> None:
        if req.sampler is not None:
            self._lc.llama_sampler_free(req.sampler)
            req.sampler = None

    def _step(self) -> None:
        """One ``llama_decode`` over every running request, then one token for each that asked."""
        for slot in self._running():  # a caller gave up (its task was cancelled): free its sequence
            if slot.request is not None and slot.request.future.cancelled():
                self._free_sampler(slot.request)
                slot.request = None
                self._room = self.batch
        b = self._batch
        entries: list[tuple[_Slot, int]] = []  # (slot, tokens it feeds)
        asks: list[tuple[_Slot, int]] = []  # (slot, batch index of its logits)
        n = 0
        running = self._running()
        for slot in running:
            req = slot.request
            assert req is not None
            if req.next_token is not None:
                self._put(b, n, req.next_token, len(slot.tokens), slot.seq, True)
                asks.append((slot, n))
                entries.append((slot, 1))
                n += 1
        generating = n
        for slot in running:
            req = slot.request
            assert req is not None
            if req.next_token is None and req.todo and n < self.n_batch:
                chunk = req.todo[: self.n_batch - n]
                if req.save_prefix and 0 < req.prefix - len(slot.tokens) < len(chunk):
                    chunk = chunk[: req.prefix - len(slot.tokens)]  # the prefix alone, to be saved
                last = len(chunk) == len(req.todo)
                for i, tok in enumerate(chunk):
                    self._put(b, n + i, tok, len(slot.tokens) + i, slot.seq, last and i == len(chunk) - 1)
                if last:
                    asks.append((slot, n + len(chunk) - 1))
                entries.append((slot, len(chunk)))
                n += len(chunk)
        if n == 0:
            return
        b.n_tokens = n
        t0 = time.perf_counter()
        rc = self._lc.llama_decode(self._ctx.ctx, b)
        t1 = time.perf_counter()
        self.stats.decode_s += t1 - t0
        if n > generating:
            self.stats.prompt_decode_s += t1 - t0
            self.stats.prompt_steps += 1
        if rc == 1:  # no room in the KV cache (the cache is as before the call)
            self._make_room()
            return
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")
        self.stats.steps += 1
        self.stats.generating += generating
        self.stats.prompt_tokens += n - generating
        for slot, count in entries:
            req = slot.request
            assert req is not None
            if req.next_token is not None:
                slot.tokens.append(req.next_token)
                req.next_token = None
            else:
                slot.tokens.extend(req.todo[:count])
                del req.todo[:count]
                if req.save_prefix and len(slot.tokens) == req.prefix:
                    self._save_state(slot, req)
        for slot, index in asks:
            req = slot.request
            assert req is not None
            token = int(self._lc.llama_sampler_sample(req.sampler, self._ctx.ctx, index))
            self.stats.generated_tokens += 1
            self._take(slot, req, token)
        self.stats.sample_s += time.perf_counter() - t1

    @staticmethod
    def _put(b: Any, i: int, token: int, pos: int, seq: int, logits: bool) -> None:
        b.token[i] = token
        b.pos[i] = pos
        b.n_seq_id[i] = 1
        b.seq_id[i][0] = seq
        b.logits[i] = logits

    def _take(self, slot: _Slot, req: _Request, token: int) -> None:
        """A sampled token: the request ends (as ``create_completion`` ends) or feeds it next step."""
        if self._lc.llama_vocab_is_eog(self._vocab, token):
            return self._finish(slot, req, self.llm.detokenize(req.completion))
        req.completion.append(token)
        text: bytes = self.llm.detokenize(req.completion)
        for k, char in enumerate(text[-3:]):  # an incomplete UTF-8 character: no stop check yet
            k = 3 - k
            for num, pattern in ((2, 192), (3, 224), (4, 240)):
                if num > k and pattern & char == pattern:
                    req.multibyte_fix = num - k
        if req.multibyte_fix > 0:
            req.multibyte_fix -= 1
            req.next_token = token
            return None
        stops = [s for s in self._stop if s in text]
        if stops:
            return self._finish(slot, req, text[: text.index(stops[0])])
        if len(req.completion) >= req.max_tokens:
            return self._finish(slot, req, text)
        req.next_token = token
        return None

    def _finish(self, slot: _Slot, req: _Request, text: bytes) -> None:
        self._free_sampler(req)
        slot.request = None
        self._clock += 1
        slot.used = self._clock
        self._room = self.batch
        if not req.future.cancelled():
            req.future.set_result(BatchResult(text.decode("utf-8", errors="ignore"), len(req.completion),
                                              req.reused))

    def _make_room(self) -> None:
        """The KV cache is full: drop the least recently used idle slot's tokens, else set the
        latest running request back in the queue (it restarts from its prompt later)."""
        idle = [s for s in self._slots if s.request is None and s.tokens]
        if idle:
            victim = min(idle, key=lambda s: s.used)
            self._lc.llama_memory_seq_rm(self._mem, victim.seq, -1, -1)
            victim.tokens = []
            self.stats.evicted += 1
            return
        running = self._running()
        if len(running) <= 1:
            raise RuntimeError("the prompt does not fit the KV cache")
        slot = max(running, key=lambda s: s.request.admitted if s.request else 0)
        req = slot.request
        assert req is not None
        self._free_sampler(req)
        self._lc.llama_memory_seq_rm(self._mem, slot.seq, -1, -1)
        slot.request, slot.tokens = None, []
        req.completion, req.next_token, req.multibyte_fix = [], None, 0
        self._room = max(1, len(running) - 1)
        self._room_since = self.stats.steps
        self.stats.preempted += 1
        self._queue.appendleft(req)

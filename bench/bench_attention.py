"""Embedded model, batched path: a decoding step with and without llama.cpp's flash attention.

N sequences share a prompt prefix of P tokens in one unified KV cache (as a variant's episodes
do), each with its own short suffix; after the prefix is evaluated, each generates G tokens
(raw text, no stop). For each setting it prints the milliseconds per decoding step and per
generated token inside ``llama_decode``, and the seconds the shared prefix took to evaluate.
On CPU, flash attention walks the cache one query row and one cell at a time; without it a
step's attention is one matrix product over the cache's cells up to the highest one in use
(cells of other sequences included, masked). ``+K`` in a setting first leaves K other sequences of
200 tokens idle in the cache, as a running study's finished episodes do. Which one wins depends on
N, on the context length and on how full the cache is: this prints it.

    python -m bench.bench_attention [--settings fa:13,nofa:13,fa:13+60,nofa:13+60] [--prefix 2000] [--gen 30]
"""

from __future__ import annotations

import argparse
import time

from toolbias.providers.llama_batch import BatchDecoder, Sampling
from toolbias.providers.local import _import_llama
from toolbias.providers.weights import default_model_path

TEXT = "Alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu. " * 400


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--settings", default="fa:13,nofa:13,fa:13+60,nofa:13+60",
                    help="comma-separated fa:N[+K] or nofa:N[+K] (N sequences at once, K idle ones)")
    ap.add_argument("--prefix", type=int, default=2000, help="shared prompt tokens")
    ap.add_argument("--gen", type=int, default=30, help="tokens each sequence generates")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    llama_cpp = _import_llama()
    llm = llama_cpp.Llama(model_path=str(default_model_path()), n_ctx=256, n_batch=256, n_threads=args.threads,
                          n_threads_batch=args.threads, verbose=False)
    words = llm.tokenize(TEXT.encode())
    base = words[: args.prefix]
    print(f"{'setting':>12} {'prefix s':>9} {'steps':>6} {'ms/step':>8} {'ms/gen tok':>11}")
    for setting in args.settings.split(","):
        kind, sizes = setting.split(":")
        n, _, idle_text = sizes.partition("+")
        n, idle = int(n), int(idle_text or 0)
        decoder = BatchDecoder(llm, batch=n, slots=n + 1 + idle, kv_cells=16384, n_batch=512,
                               n_threads=args.threads, flash_attn=kind == "fa", stop=[])
        others = [llm.tokenize(f"Other {j} ".encode()) + words[10 * j: 10 * j + 200] for j in range(idle)]
        for f in [decoder.submit(p, 1, Sampling()) for p in others]:  # left idle in the cache
            f.result()
        prompts = [base + llm.tokenize(f" Item {i}: the number {i * 7} is".encode()) for i in range(n)]
        t0 = time.perf_counter()
        decoder.submit(prompts[0], 1, Sampling()).result()  # the shared prefix, evaluated once
        prefix_s = time.perf_counter() - t0
        for f in [decoder.submit(p, 1, Sampling()) for p in prompts]:  # every suffix, then measure generation
            f.result()
        s0, steps0 = decoder.stats.decode_s, decoder.stats.steps
        results = [f.result() for f in [decoder.submit(p, args.gen, Sampling()) for p in prompts]]
        steps = decoder.stats.steps - steps0
        decode_s = decoder.stats.decode_s - s0
        generated = sum(r.completion_tokens for r in results)
        print(f"{setting:>12} {prefix_s:>9.1f} {steps:>6} {decode_s / steps * 1000:>8.0f} "
              f"{decode_s / generated * 1000:>11.1f}", flush=True)
        decoder.close()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""bench/serve_load.py — a load generator for OpenAI-compatible servers (eddy serve,
llama-server), Python standard library only.

    bench/serve_load.py --url http://127.0.0.1:8080 [--clients 1,4,16] [--requests 4]
                        [--max-tokens 64] [--prompt-words 40] [--chat] [--json]

For each count of clients C: C threads each send --requests streaming requests one after
another (completions by default, chat with --chat; temperature 0, a distinct prompt per
request so no two share more than their first words, stream_options.include_usage on).
Measured per request: time to first token (TTFT: from sending to the first event with
text) and the gaps between text events (inter-token latency, ITL); per run: generated tokens
(from usage) over the wall time of the run (aggregate t/s). Prints one line per C (or one
JSON object per line with --json): aggregate t/s, TTFT p50/p99, ITL p50/p99, in ms.
"""
import argparse
import http.client
import json
import sys
import threading
import time
import urllib.parse

WORDS = ("the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing "
         "matches near old castles under purple skies and bright stars").split()


def prompt_for(i, n_words):
    # request i: a distinct opening, then common words
    return " ".join(["Story %d:" % i] + [WORDS[(i * 7 + k) % len(WORDS)] for k in range(n_words)])


def sse_events(r):
    """The JSON objects of a server-sent event stream (an HTTP response), as they arrive."""
    buf = b""
    while True:
        chunk = r.read1(65536)
        if not chunk:
            return
        buf += chunk
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            data = ev.decode("utf-8", "replace")
            if data.startswith("data: ") and data != "data: [DONE]":
                yield json.loads(data[6:])


def event_text(j):
    """The text of a streamed completion or chat completion event ("" for none)."""
    ch = j.get("choices") or []
    return (ch[0].get("text") or (ch[0].get("delta") or {}).get("content") or "") if ch else ""


def one_request(host, port, path, body, out):
    t0 = time.perf_counter()
    c = http.client.HTTPConnection(host, port, timeout=600)
    c.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        out.append({"error": r.status})
        c.close()
        return
    first, last, gaps, n_tokens = None, None, [], 0
    for j in sse_events(r):
        if j.get("usage"):
            n_tokens = j["usage"]["completion_tokens"]
        if event_text(j):
            now = time.perf_counter()
            if first is None:
                first = now - t0
            else:
                gaps.append(now - last)
            last = now
    c.close()
    out.append({"ttft": first, "gaps": gaps, "tokens": n_tokens})


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def run(args, n_clients, base_index):
    u = urllib.parse.urlparse(args.url)
    path = "/v1/chat/completions" if args.chat else "/v1/completions"
    results = []

    def client(k):
        for q in range(args.requests):
            i = base_index + k * args.requests + q
            body = {"max_tokens": args.max_tokens, "temperature": 0, "stream": True,
                    "stream_options": {"include_usage": True}}
            if args.ignore_eos:
                body["ignore_eos"] = True
            if args.chat:
                body["messages"] = [{"role": "user", "content": prompt_for(i, args.prompt_words)}]
            else:
                body["prompt"] = prompt_for(i, args.prompt_words)
            one_request(u.hostname, u.port or 80, path, body, results)

    t0 = time.perf_counter()
    ts = [threading.Thread(target=client, args=(k,)) for k in range(n_clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall = time.perf_counter() - t0
    ok = [r for r in results if "error" not in r]
    tokens = sum(r["tokens"] for r in ok)
    ttft = [r["ttft"] for r in ok if r["ttft"] is not None]
    gaps = [g for r in ok for g in r["gaps"]]
    return {"clients": n_clients, "requests": len(results), "errors": len(results) - len(ok), "tokens": tokens,
            "seconds": round(wall, 3), "aggregate_tps": round(tokens / wall, 1) if wall > 0 else 0,
            "ttft_p50_ms": round(1e3 * pct(ttft, 50), 1), "ttft_p99_ms": round(1e3 * pct(ttft, 99), 1),
            "itl_p50_ms": round(1e3 * pct(gaps, 50), 2), "itl_p99_ms": round(1e3 * pct(gaps, 99), 2)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--clients", default="1,4,16")
    ap.add_argument("--requests", type=int, default=4, help="requests per client")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--prompt-words", type=int, default=40)
    ap.add_argument("--chat", action="store_true")
    ap.add_argument("--ignore-eos", action="store_true", help="send llama-server's ignore_eos (eddy ignores it)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    base = 0
    for c in [int(x) for x in args.clients.split(",")]:
        r = run(args, c, base)
        base += c * args.requests
        if args.json:
            print(json.dumps(r), flush=True)
        else:
            print("clients %3d: %4d requests (%d errors), %6d tokens in %7.2f s: %7.1f t/s aggregate; "
                  "TTFT p50 %7.1f ms p99 %7.1f ms; ITL p50 %6.2f ms p99 %6.2f ms" %
                  (r["clients"], r["requests"], r["errors"], r["tokens"], r["seconds"], r["aggregate_tps"],
                   r["ttft_p50_ms"], r["ttft_p99_ms"], r["itl_p50_ms"], r["itl_p99_ms"]), flush=True)


if __name__ == "__main__":
    sys.exit(main())

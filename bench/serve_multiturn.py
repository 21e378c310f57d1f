#!/usr/bin/env python3
"""bench/serve_multiturn.py — time to first token of a chat's next turn, for OpenAI-compatible
servers (eddy serve, llama-server); Python standard library only.

    bench/serve_multiturn.py --url http://127.0.0.1:8080 --text FILE [--history-tokens 4000]
                             [--conversations 3] [--turns 3] [--interleave] [--json]

Each conversation starts from a history of alternating user and assistant messages cut from
FILE (a different part of it per conversation, about --history-tokens tokens as the server's
/tokenize counts them), then runs --turns turns: each turn sends the whole conversation so
far plus a new short user message (streamed, temperature 0, 16 tokens) and appends the
answer, as a chat client does. The first turn's prompt is new to the server (cold); every
later turn repeats the previous turn's prompt and answer (warm: a server that keeps the
conversation's state evaluates only the new message). With --interleave the conversations
take turns (A, B, C, A, B, ...), as users sharing a server do: a server that keeps only its
slots' states (one per slot) has lost A's by its next turn. Prints the cold and warm time to first
token (median over conversations, in ms) and the prompt tokens of a warm turn; --json prints
one JSON object.
"""
import argparse
import http.client
import json
import statistics
import time
import urllib.parse

from serve_load import event_text, sse_events


def post(host, port, path, body):
    c = http.client.HTTPConnection(host, port, timeout=900)
    c.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    if r.status != 200:
        raise SystemExit("%s: status %d: %s" % (path, r.status, data[:300]))
    return json.loads(data)


def stream_chat(host, port, messages, max_tokens):
    """(time to first token in s, answer text, prompt tokens from usage)."""
    body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    c = http.client.HTTPConnection(host, port, timeout=900)
    c.request("POST", "/v1/chat/completions", body=json.dumps(body).encode(),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise SystemExit("chat: status %d: %s" % (r.status, r.read()[:300]))
    first, text, prompt_tokens = None, "", None
    for j in sse_events(r):
        if j.get("usage"):
            prompt_tokens = j["usage"].get("prompt_tokens")
        piece = event_text(j)
        if piece and first is None:
            first = time.perf_counter() - t0
        text += piece
    c.close()
    return first if first is not None else time.perf_counter() - t0, text, prompt_tokens


def history(host, port, text, start, n_tokens):
    """Alternating user/assistant messages of paragraphs of text from offset start, until
    about n_tokens tokens."""
    paras = [p.strip().replace("\n", " ") for p in text[start:].split("\n\n") if len(p.strip()) > 40]
    msgs, total, i = [], 0, 0
    while total < n_tokens and i < len(paras):
        role = "user" if len(msgs) % 2 == 0 else "assistant"
        content = paras[i]
        i += 1
        while i < len(paras) and len(content) < 1200:  # turns of a few hundred tokens
            content += " " + paras[i]
            i += 1
        msgs.append({"role": role, "content": content})
        total += len(post(host, port, "/tokenize", {"content": content})["tokens"]) + 5
    if msgs[-1]["role"] == "user":
        msgs.pop()
    return msgs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--text", required=True)
    ap.add_argument("--history-tokens", type=int, default=4000)
    ap.add_argument("--conversations", type=int, default=3)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--interleave", action="store_true",
                    help="a turn of each conversation in turn, not one conversation after the other")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    u = urllib.parse.urlparse(a.url)
    host, port = u.hostname, u.port or 80
    with open(a.text, encoding="utf-8") as f:
        text = f.read()
    cold, warm, warm_prompt = [], [], []
    convs = [history(host, port, text, (c + 1) * len(text) // (a.conversations + 2), a.history_tokens)
             for c in range(a.conversations)]
    # one conversation after the other, or (--interleave) a turn of each in turn, as users
    # sharing a server do
    order = ([(c, t) for t in range(a.turns) for c in range(a.conversations)] if a.interleave else
             [(c, t) for c in range(a.conversations) for t in range(a.turns)])
    for conv, turn in order:
        msgs = convs[conv]
        msgs.append({"role": "user", "content": "Question %d of conversation %d: say it briefly." % (turn, conv)})
        ttft, answer, n_prompt = stream_chat(host, port, msgs, 16)
        msgs.append({"role": "assistant", "content": answer})
        (cold if turn == 0 else warm).append(ttft)
        if turn:
            warm_prompt.append(n_prompt or 0)
    res = {"cold_ttft_ms": 1000 * statistics.median(cold), "warm_ttft_ms": 1000 * statistics.median(warm),
           "warm_prompt_tokens": int(statistics.median(warm_prompt)), "conversations": a.conversations,
           "turns": a.turns, "interleave": a.interleave}
    if a.json:
        print(json.dumps(res))
    else:
        print("cold TTFT %.0f ms, warm TTFT %.0f ms (median; warm prompts of %d tokens)" %
              (res["cold_ttft_ms"], res["warm_ttft_ms"], res["warm_prompt_tokens"]))


if __name__ == "__main__":
    main()

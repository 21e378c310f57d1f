"""tests/server/test_server.py EDDY_BINARY [PART...] — `eddy serve` tested from outside.

Parts (all by default):
  api       the official openai client: chat and completions, streamed and not, usage,
            temperature-0 and seeded answers equal to `eddy run`'s, stop strings, logprobs,
            the prefix cache and session_id, /tokenize, /detokenize, /v1/models, /metrics,
            API keys, 429 with Retry-After when the queue is full
  load      32 concurrent streaming clients, every tenth hanging up mid-stream: each
            completed answer equals the answer alone; no slot is left busy
  hostile   a few hundred malformed and hostile requests, each answered with its status
            (400, 404, 405, 413, ...) and an OpenAI error object; the server stays up
  shutdown  SIGTERM during a stream: the stream ends with [DONE], the process exits 0
  spec      speculative decoding (prompt lookup, a draft model, MTP): eddy run's answers
  gpu       (not in the default set; EDDY_BINARY from `make CUDA_EMU=1`) on the emulated GPU,
            sized so that the snapshot states share 3 KV blocks: eddy run's answers, and
            pinned sessions dropped, least recently used first, where a step needs their blocks;
            sized so that the default prefix cache does not fit: a smaller one; a GPU that
            faults: 500 for the request it hits, 503 for what comes after and for /health

Every server runs on 127.0.0.1 with a port the kernel picks (--port 0, read from the
server's first line); every wait is bounded. Prints "N passed, M failed".
"""
import http.client
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

EDDY = sys.argv[1]
PARTS = sys.argv[2:] or ["api", "load", "hostile", "shutdown", "spec"]
SLOW = "asan" in EDDY  # the sanitizer build is several times slower
QWEN = "tests/data/models/qwen35-tiny-f32.gguf"    # has a chat template
LLAMA = "tests/data/models/llama-tiny-f32.gguf"    # varied (random) text, no template
QWEN_MTP = "tests/data/models/qwen35-mtp-tiny-f32.gguf"  # with a multi-token-prediction layer
PASS = 0
FAIL = 0


def ok():
    global PASS
    PASS += 1


def bad(msg):
    global FAIL
    FAIL += 1
    print("FAIL " + msg, flush=True)


def check(cond, msg):
    ok() if cond else bad(msg)


# ==== The server process ====

class Server:
    def __init__(self, model, *args, log_level=None, env=None):
        self.lines = []
        cmd = [EDDY, "serve", "-m", model, "--port", "0", "-t", "2", *args]
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1", **(env or {}))
        if log_level:
            env["EDDY_LOG_LEVEL"] = log_level
        self.p = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env)
        self.port = None
        self.drainer = threading.Thread(target=self._drain, daemon=True)
        self.drainer.start()
        deadline = time.time() + (120 if SLOW else 30)
        while self.port is None and time.time() < deadline and self.p.poll() is None:
            time.sleep(0.05)
        if self.port is None:
            self.p.kill()
            raise RuntimeError("eddy serve did not start: " + " | ".join(self.lines[-5:]))
        self.base = "http://127.0.0.1:%d" % self.port

    def _drain(self):
        for raw in self.p.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.lines.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))

    def alive(self):
        return self.p.poll() is None

    def stop(self):
        """SIGTERM; the exit status (None when it had to be killed)."""
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        try:
            rc = self.p.wait(timeout=60 if SLOW else 20)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            rc = None
        self.drainer.join(10)
        return rc


def request(port, method, path, body=None, headers=None, timeout=60):
    """(status, headers dict, body bytes) of one request on a fresh connection."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


def post(port, path, body, **kw):
    s, h, b = request(port, "POST", path, body, **kw)
    try:
        return s, h, json.loads(b)
    except ValueError:
        return s, h, b


def metrics(port):
    s, _, b = request(port, "GET", "/metrics")
    out = {}
    for line in b.decode().splitlines():
        if line and not line.startswith("#"):
            k, v = line.split()
            out[k] = float(v)
    return out


def settled_lines(sv, quiet=0.3, seconds=5):
    """How many log lines sv has once none came for `quiet` seconds (the log reader has
    caught up), waiting at most `seconds`."""
    end = time.time() + seconds
    n = len(sv.lines)
    while time.time() < end:
        time.sleep(quiet)
        if len(sv.lines) == n:
            break
        n = len(sv.lines)
    return n


def logprobs_both_ways(sv, body, marker, digest_tag):
    """body (a greedy completion with logprobs) alone, whose steps (log lines with marker)
    must all take each row's best logits and log-sum-exp (digest_tag), then beside a request
    that samples from whole rows (top_k 0), which makes the steps they share take whole
    rows: the same text, and the same log-probabilities within 1e-4 (the engine's
    log-sum-exp against the server's own over a row)."""
    n_lines = settled_lines(sv)
    s, _, alone = post(sv.port, "/v1/completions", body)
    lines = [x for x in sv.lines[n_lines:settled_lines(sv)] if marker in x]
    check(s == 200 and lines and all(digest_tag in x for x in lines),
          "logprobs alone: %s, steps %s" % (alone, lines[:3]))
    whole = {"prompt": "hello", "max_tokens": 200, "temperature": 1, "top_k": 0, "seed": 9}
    for _ in range(3):  # the two must share a step at least once: on a loaded machine up to three tries
        n_lines = settled_lines(sv)
        got = {}
        th = threading.Thread(target=lambda: got.update(w=post(sv.port, "/v1/completions", whole)))
        th.start()
        s2, _, paired = post(sv.port, "/v1/completions", body)
        th.join(120)
        shared = [x for x in sv.lines[n_lines:settled_lines(sv)] if marker in x and "whole rows of logits" in x]
        if shared:
            break
    check(shared, "logprobs beside whole rows: no step took whole rows")
    if s != 200 or s2 != 200:
        check(False, "logprobs both ways: %s, %s" % (alone, paired))
        return
    a, b = alone["choices"][0], paired["choices"][0]
    la, lb = a["logprobs"], b["logprobs"]
    same = a["text"] == b["text"] and la["tokens"] == lb["tokens"] and len(la["token_logprobs"]) > 0
    for x, y in zip(la["token_logprobs"], lb["token_logprobs"]):
        same = same and abs(x - y) <= 1e-4
    for x, y in zip(la["top_logprobs"], lb["top_logprobs"]):
        same = same and sorted(x) == sorted(y) and all(abs(x[t] - y[t]) <= 1e-4 for t in x)
    check(same, "logprobs from the best logits against whole rows: %s vs %s" %
          ({k: la[k][:3] for k in la}, {k: lb[k][:3] for k in lb}))


def wait_idle(port, seconds=20):
    """/metrics once no slot is busy and nothing waits (or the bound passed)."""
    deadline = time.time() + seconds
    m = metrics(port)
    while time.time() < deadline and (m["eddy_slots_busy"] or m["eddy_requests_queued"]):
        time.sleep(0.05)
        m = metrics(port)
    return m


def is_error_object(j, status):
    if not isinstance(j, dict) or not isinstance(j.get("error"), dict):
        return False
    e = j["error"]
    return (isinstance(e.get("message"), str) and e["message"] and isinstance(e.get("type"), str)
            and "param" in e and "code" in e)


def eddy_run(model, prompt, *args):
    """eddy run's continuation (without the newline it ends its output with)."""
    r = subprocess.run([EDDY, "run", "-m", model, "-p", prompt, "-t", "1", *args], capture_output=True, timeout=120)
    out = r.stdout.decode("utf-8")
    return out[:-1] if out.endswith("\n") else out


def sse_stream(port, path, body, hang_up_after=None, timeout=60):
    """Reads a stream: (list of parsed events, saw [DONE]). hang_up_after: close the
    socket after that many events."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    events, done = [], False
    if r.status != 200:
        c.close()
        return r.status, events, done
    buf = b""
    while True:
        chunk = r.read1(65536) if hasattr(r, "read1") else r.read(1)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            data = ev.decode()[len("data: "):]
            if data == "[DONE]":
                done = True
            else:
                events.append(json.loads(data))
            if hang_up_after is not None and len(events) >= hang_up_after:
                c.sock.shutdown(socket.SHUT_RDWR)
                c.close()
                return 200, events, done
    c.close()
    return 200, events, done


def quietly(fn, *args):
    """fn(*args), its exceptions dropped (a background request the server's stop cuts off)."""
    try:
        fn(*args)
    except Exception:  # noqa: BLE001
        pass


def stream_text(events, chat):
    if chat:
        return "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices"))
    return "".join(e["choices"][0]["text"] for e in events if e.get("choices"))


# ==== api ====

def part_api():
    import openai
    # bad command lines: one line "eddy: error: ...", exit status 1
    for args, pat in [([], "no model given"), (["-m", QWEN, "--port", "70000"], "--port: 70000 is out of range"),
                      (["-m", QWEN, "--host", "nowhere"], "is not an IPv4 or IPv6 address"),
                      (["-m", QWEN, "-p", "hi"], "come with each request"), (["-m", QWEN, "-np", "0"], "-np: 0"), (["-m", QWEN, "--prefill-chunk", "0"], "--prefill-chunk: 0"),
                      (["-m", QWEN, "--bogus"], "unknown option '--bogus' for 'serve'"),
                      (["-m", "/nonexistent.gguf"], "/nonexistent.gguf")]:
        r = subprocess.run([EDDY, "serve", *args], capture_output=True, timeout=60)
        err = r.stderr.decode()
        check(r.returncode == 1 and err.count("\n") == 1 and err.startswith("eddy: error: ") and pat in err,
              "serve %s: %s %r" % (args, r.returncode, err))
    sv = Server(QWEN, "-np", "4", "--cache-ram", "64")
    try:
        cl = openai.OpenAI(base_url=sv.base + "/v1", api_key="none", max_retries=0, timeout=60)
        p = sv.port
        s, _, j = post(p, "/tokenize", {"content": "Once upon a time", "add_special": True})
        n_prompt = len(j["tokens"])
        check(s == 200 and n_prompt > 0, "tokenize: %s %s" % (s, j))
        s, _, j2 = post(p, "/detokenize", {"tokens": j["tokens"]})
        check(s == 200 and j2["content"].endswith("Once upon a time"), "detokenize: %s" % j2)
        s, _, j3 = post(p, "/tokenize", {"content": "hi", "with_pieces": True})
        check(s == 200 and all("id" in t and "piece" in t for t in j3["tokens"]), "tokenize with_pieces: %s" % j3)
        s, _, h = request(p, "GET", "/health")
        check(s == 200 and json.loads(h) == {"status": "ok"}, "health: %s %s" % (s, h))
        models = cl.models.list()
        check([m.id for m in models.data] == ["qwen35-tiny-f32.gguf"], "models: %s" % models)

        # completions, temperature 0: eddy run's answer; usage counted
        want = eddy_run(QWEN, "Once upon a time", "-n", "10", "--temp", "0")
        r = cl.completions.create(model="x", prompt="Once upon a time", max_tokens=10, temperature=0)
        check(r.choices[0].text == want, "completion differs from eddy run: %r vs %r" % (r.choices[0].text, want))
        check(r.usage.prompt_tokens == n_prompt and r.usage.completion_tokens == 10 and
              r.usage.total_tokens == n_prompt + 10 and r.choices[0].finish_reason == "length",
              "completion usage %s finish %s" % (r.usage, r.choices[0].finish_reason))
        check(r.object == "text_completion" and r.id.startswith("cmpl-"), "completion object %s" % r.object)
        # streamed: the same text, usage at the end
        st = cl.completions.create(model="x", prompt="Once upon a time", max_tokens=10, temperature=0, stream=True,
                                   stream_options={"include_usage": True})
        chunks = list(st)
        text = "".join(c.choices[0].text for c in chunks if c.choices)
        check(text == want, "streamed completion %r vs %r" % (text, want))
        check(chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 10 and not chunks[-1].choices,
              "streamed completion usage: %s" % chunks[-1])
        check([c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length", "streamed finish_reason")

        # seeded sampling: eddy run's answer with the same seed (server defaults are run's)
        for model_seed in (7, 12345):
            want_s = eddy_run(QWEN, "In the beginning", "-n", "12", "--seed", str(model_seed))
            r = cl.completions.create(model="x", prompt="In the beginning", max_tokens=12, seed=model_seed)
            check(r.choices[0].text == want_s, "seeded completion %r vs run %r" % (r.choices[0].text, want_s))

        # ignore_eos: exactly max_tokens, as eddy run --ignore-eos
        want_i = eddy_run(QWEN, "hello", "-n", "40", "--temp", "0", "--ignore-eos")
        r = cl.completions.create(model="x", prompt="hello", max_tokens=40, temperature=0,
                                  extra_body={"ignore_eos": True})
        check(r.choices[0].text == want_i and r.usage.completion_tokens == 40, "ignore_eos: %r vs %r" %
              (r.choices[0].text, want_i))
        # a long prompt, prefilled over several steps (-b 256) while another stream runs
        long_prompt = " ".join("word%d" % (i % 37) for i in range(700))
        want_l = eddy_run(QWEN, long_prompt, "-n", "8", "--temp", "0")
        bg = threading.Thread(target=lambda: cl.completions.create(model="x", prompt="x", max_tokens=200,
                                                                   extra_body={"ignore_eos": True}))
        bg.start()
        r = cl.completions.create(model="x", prompt=long_prompt, max_tokens=8, temperature=0)
        bg.join(60)
        check(r.choices[0].text == want_l and r.usage.prompt_tokens > 512, "long prompt: %r vs %r (%s)" %
              (r.choices[0].text, want_l, r.usage))

        # chat, temperature 0: eddy run --chat's answer
        want_c = eddy_run(QWEN, "hi there", "--chat", "-n", "8", "--temp", "0")
        r = cl.chat.completions.create(model="x", messages=[{"role": "user", "content": "hi there"}], max_tokens=8,
                                       temperature=0)
        check(r.choices[0].message.content == want_c, "chat %r vs run --chat %r" % (r.choices[0].message.content, want_c))
        check(r.choices[0].message.role == "assistant" and r.object == "chat.completion", "chat message role")
        check(r.usage.completion_tokens == 8 and r.usage.total_tokens == r.usage.prompt_tokens + 8, "chat usage %s" % r.usage)
        st = cl.chat.completions.create(model="x", messages=[{"role": "user", "content": "hi there"}], max_tokens=8,
                                        temperature=0, stream=True, stream_options={"include_usage": True})
        chunks = list(st)
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        check(text == want_c, "streamed chat %r vs %r" % (text, want_c))
        check(chunks[0].choices[0].delta.role == "assistant", "first chunk carries the role")
        check(chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 8, "streamed chat usage")
        # the system message, as run --chat --system
        want_sys = eddy_run(QWEN, "hi", "--chat", "--system", "You are terse.", "-n", "6", "--temp", "0")
        r = cl.chat.completions.create(model="x", messages=[{"role": "system", "content": "You are terse."},
                                                            {"role": "user", "content": "hi"}],
                                       max_tokens=6, temperature=0)
        check(r.choices[0].message.content == want_sys, "chat with system %r vs %r" % (r.choices[0].message.content, want_sys))

        # stop strings: the text ends before the first match; finish_reason stop
        long_ = eddy_run(QWEN, "The cat sat on the", "-n", "20", "--temp", "0")
        stop = long_[5:9]
        r = cl.completions.create(model="x", prompt="The cat sat on the", max_tokens=20, temperature=0, stop=[stop])
        cut = long_[:long_.find(stop)]
        check(r.choices[0].text == cut and r.choices[0].finish_reason == "stop",
              "stop %r: %r (want %r) %s" % (stop, r.choices[0].text, cut, r.choices[0].finish_reason))
        st = cl.completions.create(model="x", prompt="The cat sat on the", max_tokens=20, temperature=0, stop=stop,
                                   stream=True)
        text = "".join(c.choices[0].text for c in st if c.choices)
        check(text == cut, "streamed stop: %r vs %r" % (text, cut))

        # logprobs: greedy picks the top alternative; one entry per token
        r = cl.chat.completions.create(model="x", messages=[{"role": "user", "content": "hello"}], max_tokens=5,
                                       temperature=0, logprobs=True, top_logprobs=3)
        lp = r.choices[0].logprobs.content
        check(len(lp) == r.usage.completion_tokens and all(len(e.top_logprobs) == 3 for e in lp) and
              all(e.token == e.top_logprobs[0].token and abs(e.logprob - e.top_logprobs[0].logprob) < 1e-5 and
                  e.logprob <= 0 for e in lp), "chat logprobs: %s" % lp)
        r = cl.completions.create(model="x", prompt="hello", max_tokens=4, temperature=0, logprobs=2)
        lpc = r.choices[0].logprobs
        check(len(lpc.tokens) == 4 and len(lpc.token_logprobs) == 4 and len(lpc.top_logprobs) == 4,
              "completion logprobs: %s" % lpc)

        # the prefix cache: the next turn of a conversation evaluates only its new tokens
        system = "You are a helpful assistant. " * 40
        msgs = [{"role": "system", "content": system}, {"role": "user", "content": "first question"}]
        r1 = cl.chat.completions.create(model="x", messages=msgs, max_tokens=6, temperature=0)
        # (the reply as the client sends it back; this model's newlines would be tokenized
        # otherwise in the history than as generated, and a prefix is matched by tokens)
        msgs2 = msgs + [{"role": "assistant", "content": "Sure."},
                        {"role": "user", "content": "second question"}]
        r2 = cl.chat.completions.create(model="x", messages=msgs2, max_tokens=6, temperature=0)
        cached = r2.usage.prompt_tokens_details.cached_tokens
        check(cached >= r1.usage.prompt_tokens, "next turn restored %s of %s tokens" % (cached, r1.usage.prompt_tokens))
        # another conversation with the same system message shares it
        r3 = cl.chat.completions.create(model="x", messages=[msgs[0], {"role": "user", "content": "other"}],
                                        max_tokens=6, temperature=0)
        check(r3.usage.prompt_tokens_details.cached_tokens >= 200, "shared system prompt: %s" % r3.usage)
        # and the cached answer is the answer from scratch (a fresh server)
        sv2 = Server(QWEN, "-np", "1", "--cache-ram", "0")
        try:
            cl2 = openai.OpenAI(base_url=sv2.base + "/v1", api_key="none", max_retries=0, timeout=60)
            r2b = cl2.chat.completions.create(model="x", messages=msgs2, max_tokens=6, temperature=0)
            check(r2b.choices[0].message.content == r2.choices[0].message.content and
                  r2b.usage.prompt_tokens_details.cached_tokens == 0,
                  "cached turn %r vs fresh %r" % (r2.choices[0].message.content, r2b.choices[0].message.content))
        finally:
            sv2.stop()
        m = metrics(p)
        check(m["eddy_cache_hits_total"] >= 2 and m["eddy_prompt_tokens_cached_total"] >= 400 and
              m["eddy_slots_total"] == 4, "metrics after cache use: %s" % m)

        # the legacy paths and token-array prompts
        s, _, j = post(p, "/completions", {"prompt": j["tokens"] if False else [1, 2, 3], "max_tokens": 2})
        check(s == 200 and j["usage"]["prompt_tokens"] == 3, "token-array prompt: %s" % j)
        check(sv.alive(), "server alive after api")
    finally:
        rc = sv.stop()
        check(rc == 0, "api server exit status %s: %s" % (rc, sv.lines[-5:]))

    # session_id pins a conversation's state: with no prefix cache and one slot, an
    # unrelated request in between leaves only the pinned state to go on from
    sv = Server(QWEN, "-np", "1", "--cache-ram", "0")
    try:
        p = sv.port
        body = {"prompt": "Once upon a time", "max_tokens": 5, "temperature": 0, "session_id": "conv-1"}
        s, _, a = post(p, "/v1/completions", body)
        post(p, "/v1/completions", {"prompt": "Something else entirely", "max_tokens": 3})
        body["prompt"] += a["choices"][0]["text"] + " and then"
        s, _, b2 = post(p, "/v1/completions", body)
        check(s == 200 and b2["usage"]["prompt_tokens_details"]["cached_tokens"] >= a["usage"]["prompt_tokens"] + 4,
              "session_id turn: %s after %s" % (b2.get("usage"), a.get("usage")))
        body["session_id"] = "conv-2"
        s, _, b3 = post(p, "/v1/completions", body)
        check(s == 200 and b3["usage"]["prompt_tokens_details"]["cached_tokens"] == 0 and
              b3["choices"][0]["text"] == b2["choices"][0]["text"], "another session_id: %s" % b3.get("usage"))
    finally:
        check(sv.stop() == 0, "session server exit")

    # the end of an answer reaches the prefix cache: when its slot takes another prompt
    # (one slot here), and when the server has been idle a moment
    sv = Server(QWEN, "-np", "1", "--cache-ram", "64")
    try:
        p = sv.port
        body = {"prompt": "Once upon a time", "max_tokens": 5, "temperature": 0}
        s, _, a = post(p, "/v1/completions", body)
        post(p, "/v1/completions", {"prompt": "Something else entirely", "max_tokens": 3, "temperature": 0})
        body["prompt"] += a["choices"][0]["text"] + " and then"
        s, _, b2 = post(p, "/v1/completions", body)
        check(s == 200 and b2["usage"]["prompt_tokens_details"]["cached_tokens"] >= a["usage"]["prompt_tokens"] + 4,
              "the answer's end after another prompt took its slot: %s after %s" % (b2.get("usage"), a.get("usage")))
        before = metrics(p)["eddy_cache_entries"]
        for _ in range(100):  # at most 10 s; the server saves after 0.25 s idle
            if metrics(p)["eddy_cache_entries"] > before:
                break
            time.sleep(0.1)
        check(metrics(p)["eddy_cache_entries"] == before + 1, "idle save: %s entries before" % before)
    finally:
        check(sv.stop() == 0, "cache server exit")

    # API key: 401 without or with a wrong key, 200 with it; /health stays open
    sv = Server(QWEN, "--api-key", "sekret")
    try:
        p = sv.port
        s, _, j = post(p, "/v1/completions", {"prompt": "hi", "max_tokens": 1})
        check(s == 401 and is_error_object(j, 401), "no key: %s %s" % (s, j))
        s, _, j = post(p, "/v1/completions", {"prompt": "hi", "max_tokens": 1}, headers={"Authorization": "Bearer nope"})
        check(s == 401, "wrong key: %s" % s)
        s, _, j = post(p, "/v1/completions", {"prompt": "hi", "max_tokens": 1},
                       headers={"Authorization": "Bearer sekret"})
        check(s == 200, "right key: %s %s" % (s, j))
        check(request(p, "GET", "/health")[0] == 200, "health without a key")
        cl = openai.OpenAI(base_url=sv.base + "/v1", api_key="sekret", max_retries=0, timeout=60)
        check(cl.completions.create(model="x", prompt="hi", max_tokens=2).usage.completion_tokens <= 2, "client key")
        try:
            openai.OpenAI(base_url=sv.base + "/v1", api_key="bad", max_retries=0).models.list()
            bad("a wrong key was accepted by /v1/models")
        except openai.AuthenticationError:
            ok()
    finally:
        check(sv.stop() == 0, "key server exit")

    # a full queue: 429 with Retry-After, the others answered
    sv = Server(LLAMA, "-np", "1", "--max-queue", "1", "-c", "4096")
    try:
        p = sv.port
        results = []

        def one(i):
            # long enough that the slot and the queue are still taken when the last one arrives
            results.append(post(p, "/v1/completions", {"prompt": "x %d" % i, "max_tokens": 2000, "seed": i,
                                                       "temperature": 1, "ignore_eos": True}))

        ts = [threading.Thread(target=one, args=(i,)) for i in range(8)]
        [t.start() for t in ts]
        [t.join(120) for t in ts]
        codes = sorted(r[0] for r in results)
        n429 = [r for r in results if r[0] == 429]
        check(len(results) == 8 and set(codes) <= {200, 429} and n429 and codes.count(200) >= 1,
              "queue full: statuses %s" % codes)
        check(all(r[1].get("retry-after") and is_error_object(r[2], 429) for r in n429), "429 with Retry-After")
        m = wait_idle(p)
        check(m["eddy_requests_rejected_total"] == len(n429) and m["eddy_slots_busy"] == 0, "429 metrics %s" % m)
    finally:
        check(sv.stop() == 0, "queue server exit")

    # --timeout: a request that outlives it gets 504, and the slot is freed. The request
    # must not finish inside the timeout on a fast machine: 4,000 tokens of the tiny model
    # took under 0.3 s on one, so it asks for 16,000 (about 6 s on a 2-core Xeon, as the
    # attention grows with the context) against 0.3 s.
    sv = Server(LLAMA, "-np", "1", "--timeout", "0.3", "-c", "16384")
    try:
        p = sv.port
        s, _, j = post(p, "/v1/completions", {"prompt": "x", "max_tokens": 16000, "temperature": 1, "seed": 1,
                                              "ignore_eos": True, "top_k": 0, "top_p": 1, "min_p": 0})
        check(s == 504 and is_error_object(j, 504), "timeout: %s %.300s" % (s, j))
        check(wait_idle(p)["eddy_slots_busy"] == 0, "slot free after the timeout")
    finally:
        check(sv.stop() == 0, "timeout server exit")


    # --prefill-chunk: a prompt that arrives while another request decodes goes in that many
    # tokens per step (the scheduler's debug lines tell each step's tokens); -b when nothing
    # else decodes
    prompt = " ".join("word%d" % i for i in range(60))
    for chunk in (16, 256):
        sv = Server(LLAMA, "-np", "2", "-c", "16384", "--prefill-chunk", str(chunk), log_level="debug")
        bg = None
        try:
            p = sv.port
            s, _, j = post(p, "/tokenize", {"content": prompt})
            n = len(j["tokens"])
            bg = threading.Thread(target=quietly, args=(sse_stream, p, "/v1/completions", {
                # still decoding when the prompt arrives, however fast the machine; the stop ends it
                "prompt": "x", "max_tokens": 16000, "ignore_eos": True, "temperature": 1, "seed": 5, "stream": True}))
            bg.start()
            deadline = time.time() + 30
            while metrics(p)["eddy_steps_total"] < 3 and time.time() < deadline:
                time.sleep(0.01)
            s, _, j = post(p, "/v1/completions", {"prompt": prompt, "max_tokens": 1, "temperature": 0})
            n += 1  # BOS
            want = [(1, min(chunk, n - i * chunk)) for i in range(-(-n // chunk))]

            def fed_steps():
                steps = [tuple(map(int, m.groups())) for m in (re.search(r"step of (\d+) decoding and (\d+) prompt", x)
                                                             for x in list(sv.lines)) if m]
                return [(d, k) for d, k in steps if k > 0][1:]  # after the background request's prompt

            # the reply can come before the thread reading the server's log has seen the last steps
            deadline = time.time() + 10
            fed = fed_steps()
            while len(fed) < len(want) and time.time() < deadline:
                time.sleep(0.05)
                fed = fed_steps()
            check(s == 200 and fed == want,
                  "--prefill-chunk %d: a %d-token prompt beside a decoding stream went in as %s" % (chunk, n, fed))
        finally:
            check(sv.stop() == 0, "--prefill-chunk server exit")
            if bg:
                bg.join(60)

    # when every row of a step samples from its best k logits alone (greedy: 1; the default
    # top-k 40 without penalties; with ignore_eos as many more as there are end-of-generation
    # tokens, removed from them; with logprobs at least as many as reported, and the rows'
    # log-sum-exps), the step takes those alone (eddy_engine_decode_top), k the largest the
    # rows need; a request with top_k 0, or logprobs with ignore_eos, beside them makes it
    # take whole rows; every answer stays its own (greedy: eddy run --temp 0's text)
    sv = Server(LLAMA, "-np", "2", "-c", "1024", log_level="debug")
    try:
        p = sv.port
        # prompts whose greedy answers hold no end-of-generation token in their first 400
        greedy = [("The cat sat on the", 400), ("In the beginning", 380)]
        want_g = [eddy_run(LLAMA, pr, "-n", str(k), "--temp", "0") for pr, k in greedy]
        sampled = {"prompt": "hello", "max_tokens": 60, "seed": 3, "temperature": 1}
        whole = dict(sampled, top_k=0)
        no_eos = dict(sampled, ignore_eos=True, max_tokens=120)
        alone = {}
        for name, body in (("sampled", sampled), ("whole", whole), ("no_eos", no_eos)):
            s, _, j = post(p, "/v1/completions", body)
            alone[name] = j["choices"][0]["text"] if s == 200 else None
        for mode, want_k in (("greedy", 1), ("sampled", 40), ("whole", 0), ("logprobs", 2), ("no_eos", -1),
                             ("no_eos_logprobs", 0)):
            got = {}

            def one(i, body):
                s, _, j = post(p, "/v1/completions", body)
                got[i] = j["choices"][0]["text"] if s == 200 else (s, j)

            bodies = [{"prompt": greedy[0][0], "max_tokens": greedy[0][1], "temperature": 0}]
            if mode == "greedy":
                bodies.append({"prompt": greedy[1][0], "max_tokens": greedy[1][1], "temperature": 0})
            elif mode in alone:
                bodies.append({"sampled": sampled, "whole": whole, "no_eos": no_eos}[mode])
            else:
                bodies.append({"prompt": greedy[1][0], "max_tokens": greedy[1][1], "temperature": 0, "logprobs": 2})
                if mode == "no_eos_logprobs":
                    bodies[-1]["ignore_eos"] = True
            # the two must decode side by side at least once: on a loaded machine one can end
            # before the other starts, so up to three tries
            for _ in range(3):
                n_lines = len(sv.lines)
                ts = [threading.Thread(target=one, args=(i, b)) for i, b in enumerate(bodies)]
                [t.start() for t in ts]
                [t.join(60) for t in ts]
                time.sleep(0.2)  # the log reader's last lines
                steps = [x for x in sv.lines[n_lines:] if "serve: a step of 2 decoding" in x]
                if steps:
                    break
            tag = "the best %d logits of each row" % want_k if want_k > 0 else "whole rows of logits"
            if mode == "logprobs":
                tag += " and its log-sum-exp"
            if want_k < 0:  # 40 and the end-of-generation tokens
                with_tag = sum(bool(re.search(r"the best (4[1-9]|[56][0-9]) logits of each row", x)) for x in steps)
                tag = "the best 40 + n_eog logits"
            else:
                with_tag = sum(tag in x for x in steps)
            want = [want_g[0], alone[mode] if mode in alone else want_g[1]]
            check(got.get(0) == want[0] and got.get(1) == want[1],
                  "%s beside greedy: %r vs %r" % (mode, [got.get(0), got.get(1)], want))
            check(steps and with_tag == len(steps),
                  "%s beside greedy: %d of %d two-row steps took %s" % (mode, with_tag, len(steps), tag))
        logprobs_both_ways(sv, {"prompt": greedy[0][0], "max_tokens": 40, "temperature": 0, "logprobs": 3},
                           "serve: a step of", "the best 3 logits of each row and its log-sum-exp")
    finally:
        check(sv.stop() == 0, "best logits server exit")


# ==== load ====

PROMPTS = ["Once upon a time", "The cat sat on the", "In the beginning", "hello world", "x", "A long time ago in a",
           "def main():", "1, 2, 3,"]


def part_load():
    np_ = "4" if SLOW else "8"
    sv = Server(LLAMA, "-np", np_, "-c", "2048", "--max-queue", "64")
    try:
        p = sv.port
        n_clients = 32
        jobs = [{"prompt": PROMPTS[i % len(PROMPTS)], "seed": i, "temperature": 1.0, "max_tokens": 40 + i % 17,
                 "top_k": 0} for i in range(n_clients)]
        # the answers alone, one at a time
        alone = []
        for b in jobs:
            s, _, j = post(p, "/v1/completions", b)
            alone.append(j["choices"][0]["text"] if s == 200 else None)
        check(all(a is not None for a in alone), "answers alone")
        check(len(set(alone)) > n_clients // 2, "the answers differ from one another (%d distinct)" % len(set(alone)))
        got = [None] * n_clients
        errors = []

        def client(i):
            try:
                hang = 2 if i % 10 == 3 else None  # about one in ten hangs up mid-stream
                body = dict(jobs[i], stream=True)
                if hang:
                    body.update(max_tokens=1500, ignore_eos=True)
                status, events, done = sse_stream(p, "/v1/completions", body, hang_up_after=hang)
                if hang:
                    got[i] = "hung up"
                elif status == 200 and done:
                    got[i] = stream_text(events, False)
                else:
                    errors.append((i, status, done))
            except Exception as e:  # noqa: BLE001 - reported as a failure
                errors.append((i, repr(e)))

        t0 = time.time()
        ts = [threading.Thread(target=client, args=(i,)) for i in range(n_clients)]
        [t.start() for t in ts]
        [t.join(300) for t in ts]
        check(not any(t.is_alive() for t in ts), "all clients finished within the bound")
        check(not errors, "stream errors: %s" % errors[:5])
        wrong = [i for i in range(n_clients) if got[i] != "hung up" and got[i] != alone[i]]
        check(not wrong, "answers differing from the answer alone: %s (%r vs %r)" %
              (wrong, got[wrong[0]] if wrong else "", alone[wrong[0]] if wrong else ""))
        # no slot leaked: all free within a bounded wait
        m = wait_idle(p)
        check(m["eddy_slots_busy"] == 0 and m["eddy_requests_queued"] == 0, "slots busy after the load: %s" % m)
        n_hung = sum(1 for g in got if g == "hung up")
        check(m["eddy_requests_cancelled_total"] >= 1 and n_hung >= 3,
              "hang-ups seen as cancellations: %d of %d" % (m["eddy_requests_cancelled_total"], n_hung))
        # and the server still answers, the same
        s, _, j = post(p, "/v1/completions", jobs[0])
        check(s == 200 and j["choices"][0]["text"] == alone[0], "an answer after the load")
        # a reader that never reads (a tiny receive buffer) holds up no one else
        k = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        k.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
        k.connect(("127.0.0.1", p))
        body = json.dumps({"prompt": "slow", "max_tokens": 1500, "ignore_eos": True, "stream": True,
                           "logprobs": 5}).encode()
        k.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        time.sleep(0.5)
        t1 = time.time()
        answers = [post(p, "/v1/completions", jobs[i]) for i in range(1, 4)]
        check(all(a[0] == 200 and a[2]["choices"][0]["text"] == alone[i + 1] for i, a in enumerate(answers)),
              "answers beside a stalled reader")
        k.close()
        m = wait_idle(p)
        check(m["eddy_slots_busy"] == 0, "the stalled reader's slot is freed once it hangs up: %s" % m)
        print("load: 3 answers beside a stalled reader in %.2f s" % (time.time() - t1), flush=True)
        print("load: %d clients in %.1f s" % (n_clients, time.time() - t0), flush=True)
    finally:
        rc = sv.stop()
        check(rc == 0, "load server exit status %s: %s" % (rc, sv.lines[-5:]))


# ==== hostile ====

def raw(port, data, timeout=10, read=True):
    """Sends raw bytes; the status of the answer (None when the server closed without one)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        try:
            s.sendall(data)
        except OSError:  # the server answered (and closed) before reading it all
            pass
        if not read:
            return None
        buf = b""
        while b"\r\n\r\n" not in buf:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            buf += chunk
        m = re.match(rb"HTTP/1\.[01] (\d{3})", buf)
        return int(m.group(1)) if m else None
    finally:
        s.close()


def part_hostile():
    sv = Server(QWEN, "-np", "2", "-c", "256")
    p = sv.port
    try:
        C, CH = "/v1/completions", "/v1/chat/completions"
        base_c = {"prompt": "hi", "max_tokens": 2}
        base_ch = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        cases = []  # (path, body bytes or dict, wanted status)
        for body in [b"", b"{", b"}", b"{\"prompt\":", b"[1,2", b"nul", b"{\"prompt\":\"hi\",}", b"\xff\xfe",
                     b"{\"prompt\": \"\xff\xfe\"}", b"{\"prompt\": \"\xc0\xaf\"}", b"{\"prompt\": \"\xed\xa0\x80\"}",
                     b"{\"prompt\": \"a\\u0000b\"}", b"{\"prompt\": \"\\ud800\"}", b"{\"a\":1,\"a\":2}",
                     b"[" * 5000 + b"]" * 5000, b"{\"prompt\": 1e999}", b"{\"max_tokens\": 123456789012345678901234567890}",
                     b"\"just a string\"", b"42", b"null", b"true", b"[]"]:
            cases += [(C, body, 400), (CH, body, 400)]
        wrong = {
            "temperature": ["hot", -1, 101, [], {}, True, 1e308], "top_p": [0, 2, "x", -0.5], "top_k": [-1, 1.5, "3"],
            "min_p": [2, "x"], "max_tokens": [-2, 1.5, "10", 1e20, [], 2 ** 70], "max_completion_tokens": ["x", -5],
            "seed": ["x", 1.5, []], "stop": [5, [1], ["a", "b", "c", "d", "e"], [""], {}],
            "presence_penalty": [3, "x"], "frequency_penalty": [-3, []], "n": [2, 0, "1"], "stream": ["yes", 1],
            "stream_options": ["x", {"include_usage": "yes"}], "session_id": [5, "", "s" * 300], "model": [5, []],
            "repeat_penalty": [0, "x"], "repeat_last_n": [-1, "x"],
        }
        for k, vals in wrong.items():
            for v in vals:
                cases.append((C, dict(base_c, **{k: v}), 400))
                cases.append((CH, dict(base_ch, **{k: v}), 400))
        for v in [None, 5, {}, [1.5], [-1], [10 ** 9], [[1]], {"a": 1}, ["a", "b"]]:
            b = dict(base_c)
            if v is None:
                del b["prompt"]
            else:
                b["prompt"] = v
            cases.append((C, b, 400))
        for v in [None, "x", [], [1], [{"content": "hi"}], [{"role": 1, "content": "x"}],
                  [{"role": "user", "content": 5}], {"role": "user"}]:
            b = dict(base_ch)
            if v is None:
                del b["messages"]
            else:
                b["messages"] = v
            cases.append((CH, b, 400))
        cases += [(CH, dict(base_ch, logprobs="yes"), 400), (CH, dict(base_ch, top_logprobs=50, logprobs=True), 400),
                  (CH, dict(base_ch, top_logprobs=2), 400), (C, dict(base_c, logprobs=50), 400),
                  (C, dict(base_c, prompt="word " * 400), 400), (CH, dict(base_ch, chat_template_kwargs=5), 400),
                  ("/tokenize", {"content": 5}, 400), ("/tokenize", {}, 400), ("/tokenize", b"{", 400),
                  ("/tokenize", {"content": "x", "add_special": "yes"}, 400),
                  ("/detokenize", {"tokens": "x"}, 400), ("/detokenize", {"tokens": [-1]}, 400),
                  ("/detokenize", {"tokens": [1.5]}, 400), ("/detokenize", {"tokens": [10 ** 12]}, 400),
                  ("/detokenize", [], 400)]
        # valid requests in between: 200
        cases += [(C, base_c, 200), (CH, base_ch, 200), (C, dict(base_c, max_tokens=0), 200),
                  (C, dict(base_c, stop="x", seed=-1, temperature=0, top_k=0), 200), ("/tokenize", {"content": ""}, 200),
                  ("/detokenize", {"tokens": []}, 200), (C, dict(base_c, prompt=["hi"]), 200),
                  (CH, dict(base_ch, messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}]), 200)]
        # random bytes and random mutations of good requests
        rng = random.Random(1234)
        for i in range(120):
            good = json.dumps(base_ch if i % 2 else base_c).encode()
            b = bytearray(good)
            for _ in range(rng.randint(1, 6)):
                op = rng.random()
                pos = rng.randrange(len(b) + 1)
                if op < 0.4 and len(b) > 1:
                    del b[min(pos, len(b) - 1)]
                elif op < 0.8:
                    b.insert(pos, rng.randrange(256))
                else:
                    b[min(pos, len(b) - 1)] = rng.choice(b"{}[]\",:0123456789-.eE\\u")
            cases.append((CH if i % 2 else C, bytes(b), None))  # any of the allowed statuses
        statuses = []
        for path, body, want in cases:
            s, h, b = request(p, "POST", path, body if isinstance(body, (bytes, dict, list)) else body)
            statuses.append(s)
            try:
                j = json.loads(b)
            except ValueError:
                j = None
            if want is None:
                check(s in (200, 400) and (s == 200 or is_error_object(j, s)),
                      "mutated %r: %s %s" % (body[:80], s, b[:200]))
            else:
                check(s == want and (s == 200 or is_error_object(j, s)),
                      "%s %r: %s (want %s) %s" % (path, body if len(repr(body)) < 200 else repr(body)[:200], s, want, b[:200]))
        check(sv.alive(), "alive after the malformed bodies")

        # paths and methods
        for m_, path, want in [("GET", "/nope", 404), ("POST", "/v1/nope", 404), ("GET", "/v1/completions", 405),
                               ("PUT", "/health", 405), ("DELETE", "/v1/models", 405), ("POST", "/health", 405),
                               ("GET", "/v1/chat/completions", 405), ("PATCH", "/tokenize", 405),
                               ("GET", "/" + "a" * 3000, 404), ("OPTIONS", "/v1/completions", 204),
                               ("GET", "/v1/models", 200), ("HEAD", "/health", 200)]:
            s, _, b = request(p, m_, path)
            check(s == want, "%s %s: %s (want %s)" % (m_, path[:40], s, want))

        # bodies over the limit: by Content-Length at once, and chunked
        s = raw(p, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   b"Content-Length: 100000000\r\n\r\n{\"prompt\":")
        check(s == 413, "Content-Length over the limit: %s" % s)
        s = raw(p, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999999\r\n\r\n")
        check(s in (400, 413), "absurd Content-Length: %s" % s)
        chunked = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        piece = b"x" * (1 << 20)
        chunked += (b"%x\r\n" % len(piece) + piece + b"\r\n") * 9 + b"0\r\n\r\n"
        s = raw(p, chunked, timeout=60)
        check(s == 413, "9 MiB chunked body: %s" % s)

        # broken HTTP: each answered 4xx or closed, never a crash
        for junk in [b"GARBAGE\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n", b"\x00\x01\x02\r\n\r\n",
                     b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"X-Long: " + b"a" * 200000 + b"\r\n\r\n",
                     b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
                     b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"]:
            s = raw(p, junk)
            check(s is None or 400 <= s < 500 or s == 505, "broken HTTP %r: %s" % (junk[:40], s))
        check(sv.alive(), "alive after broken HTTP")

        # slowloris: connections trickling headers do not stop others being served
        slow = []
        for i in range(20):
            k = socket.create_connection(("127.0.0.1", p), timeout=5)
            k.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
            slow.append(k)
        t0 = time.time()
        s, _, j = post(p, "/v1/completions", base_c, timeout=30)
        check(s == 200 and time.time() - t0 < 20, "served beside 20 slow connections: %s" % s)
        for k in slow:
            try:
                k.sendall(b"X-Slow: 1\r\n")
            except OSError:
                pass
        s, _, j = post(p, "/v1/chat/completions", base_ch, timeout=30)
        check(s == 200, "still served: %s" % s)
        for k in slow:
            k.close()

        # a client that sends its request and leaves at once
        for i in range(10):
            raw(p, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n"
                   b"{\"prompt\":\"hi\",\"max_tokens\":100, \"x\":1}", read=False)
        m = wait_idle(p)
        check(m["eddy_slots_busy"] == 0 and m["eddy_requests_queued"] == 0, "slots after hang-ups: %s" % m)
        s, _, j = post(p, "/v1/completions", base_c)
        check(s == 200 and sv.alive(), "alive and answering at the end")
        print("hostile: %d requests" % (len(cases) + 30), flush=True)
    finally:
        rc = sv.stop()
        check(rc == 0, "hostile server exit status %s: %s" % (rc, sv.lines[-8:]))


# ==== shutdown ====

def part_shutdown():
    sv = Server(LLAMA, "-np", "2", "-c", "2048")
    p = sv.port
    res = {}

    def streamer():
        res["r"] = sse_stream(p, "/v1/completions", {"prompt": "x", "max_tokens": 1900, "stream": True,
                                                     "temperature": 1, "seed": 3, "top_k": 0})

    t = threading.Thread(target=streamer)
    t.start()
    time.sleep(0.3)
    rc = sv.stop()
    t.join(30)
    status, events, done = res.get("r", (None, [], False))
    check(rc == 0, "exit status after SIGTERM: %s %s" % (rc, sv.lines[-5:]))
    check(status == 200 and done and events and events[-1]["choices"][0]["finish_reason"] in ("stop", "length"),
          "the stream ended cleanly on SIGTERM: %s %s" % (status, events[-1:] if events else None))
    check(any("SIGTERM" in line for line in sv.lines), "the shutdown is logged")
    # SIGINT (Ctrl-C) the same, and a request after it is refused: the port is closed
    sv = Server(QWEN)
    post(sv.port, "/v1/completions", {"prompt": "hi", "max_tokens": 2})
    sv.p.send_signal(signal.SIGINT)
    rc = sv.stop()
    check(rc == 0 and any("SIGINT" in line for line in sv.lines), "SIGINT: exit %s %s" % (rc, sv.lines[-3:]))
    try:
        request(sv.port, "GET", "/health", timeout=5)
        bad("the port still answers after shutdown")
    except OSError:
        ok()


def part_spec():
    """Speculative decoding: prompt lookup, a draft model and the model's MTP layer give every request the
    answer eddy run gives without drafts (greedy, seeded, stop strings, length limits),
    with several requests decoding together; the counts show up in /metrics. The verify
    steps take each row's best k logits alone (the requests' samplers read no more), with
    their log-sum-exps for a request with logprobs, whose answer and log-probabilities
    are those of whole rows."""
    prompts = ["one two three one two three one two", "Once upon a time there was", "a b a b a b a"]
    for model, args in [(LLAMA, ["--spec-type", "ngram", "--draft-max", "6"]),
                        (QWEN, ["-md", "tests/data/models/qwen35-tiny-q4_k_m.gguf", "--draft-p-min", "0"]),
                        (QWEN_MTP, ["--spec-type", "mtp", "--draft-p-min", "0.001"])]:
        want = {(pr, mode): eddy_run(model, pr, "-n", "24", *mode) for pr in prompts
                for mode in (("--temp", "0"), ("--seed", "5"))}
        sv = Server(model, "-np", "3", *args, log_level="debug")
        try:
            res = {}

            def one(pr, mode):
                body = {"prompt": pr, "max_tokens": 24}
                body.update({"temperature": 0} if mode[0] == "--temp" else {"seed": 5})
                s, _, j = post(sv.port, "/v1/completions", body)
                res[(pr, mode)] = (s, j)

            threads = [threading.Thread(target=one, args=k) for k in want]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
            for k, text in want.items():
                s, j = res.get(k, (None, None))
                got = j["choices"][0]["text"] if s == 200 else j
                if model == QWEN and k[1][0] == "--seed":  # a draft model samples its drafts: another random
                    check(s == 200 and j["usage"]["completion_tokens"] == 24, "%s seeded: %s" % (k, j))  # stream
                    continue
                check(s == 200 and got == text, "%s %s %s: %r vs eddy run's %r" % (model, args[:2], k, got, text))
            verify_lines = [x for x in sv.lines[:settled_lines(sv)] if "serve: a verify step of" in x]
            if model != QWEN:  # (a draft model's sampled drafts need whole rows)
                check(verify_lines and all("the best 40 logits of each row" in x or "the best 1 logits of each row" in x
                                           for x in verify_lines),
                      "%s: verify steps from the best logits: %s" % (args[:2], verify_lines[:3]))
            # alone, a greedy request's verify steps take each row's best logit; with logprobs
            # as many as it reports and the log-sum-exp; the same answer both ways
            for extra, tag in (({}, "the best 1 logits of each row"),
                               ({"logprobs": 2}, "the best 2 logits of each row and its log-sum-exp")):
                n_lines = settled_lines(sv)
                s, _, j = post(sv.port, "/v1/completions", dict({"prompt": prompts[0], "max_tokens": 24,
                                                                  "temperature": 0}, **extra))
                verify_lines = [x for x in sv.lines[n_lines:settled_lines(sv)] if "serve: a verify step of" in x]
                check(s == 200 and j["choices"][0]["text"] == want[(prompts[0], ("--temp", "0"))] and verify_lines and
                      all(tag in x for x in verify_lines),
                      "%s: %s with drafts: %s, %s" % (args[:2], extra, j, verify_lines[:3]))
            logprobs_both_ways(sv, {"prompt": prompts[0], "max_tokens": 24, "temperature": 0, "logprobs": 2},
                               "serve: a verify step of", "the best 2 logits of each row and its log-sum-exp")
            # a stop string inside drafted text ends the answer there
            full = want[(prompts[0], ("--temp", "0"))]
            if len(full) > 6:
                stop = full[3:6]
                s, _, j = post(sv.port, "/v1/completions", {"prompt": prompts[0], "max_tokens": 24, "temperature": 0,
                                                            "stop": [stop]})
                check(s == 200 and j["choices"][0]["text"] == full[:full.find(stop)],
                      "stop string with drafts: %r" % (j,))
            m = wait_idle(sv.port)
            check(m["eddy_spec_verify_steps_total"] > 0 and m["eddy_spec_drafted_total"] > 0 and
                  m["eddy_slots_busy"] == 0, "speculative counts in /metrics: %s" %
                  {k: v for k, v in m.items() if "spec" in k})
        finally:
            check(sv.stop() == 0, "exit status with drafts: %s" % sv.lines[-3:])


def emulated_gpu_mib(args, snapshot_blocks):
    """EDDY_EMU_GPU_MIB for a server with args whose snapshot states share snapshot_blocks
    KV blocks: the pool's sizes and the memory free before it, read off the info line of
    a server in the emulator's default 16 GiB, and the engine's rule (device_snapshot_blocks:
    the pool in 7/8 of the free memory) solved for the free memory."""
    sv = Server(QWEN, *args, log_level="info", env={"EDDY_EMU_GPU_MIB": "16384"})
    sv.stop()
    line = next((ln for ln in sv.lines if "the state pool takes" in ln), "")
    m = re.search(r"(\d+) states of (\d+) bytes, (\d+) verify row states of (\d+) bytes, (\d+) KV blocks of (\d+) "
                  r"bytes \((\d+) the snapshot states'\); (\d+) bytes were free", line)
    if not m:
        raise RuntimeError("no state pool line: " + " | ".join(sv.lines[-5:]))
    states, slot_bytes, rows, row_bytes, blocks, block_bytes, snap, free = map(int, m.groups())
    slots = states * slot_bytes + rows * row_bytes
    free_wanted = (slots + (blocks - snap + snapshot_blocks + 0.5) * block_bytes) * 8 / 7
    return "%.6f" % (16384 + (free_wanted - free) / (1 << 20))


def part_gpu():
    """Pinned sessions on a GPU whose snapshot states share 3 KV blocks (of 256 positions): one slot of 4 blocks,
    3 sessions of 3 blocks each. A third conversation finds 1 block free (the first two pinned hold 6): its step
    drops the least recently used session and goes through; every answer is eddy run's on the CPU."""
    args = ["-ngl", "99", "-np", "1", "-c", "1024", "--sessions", "3", "--cache-ram", "0"]
    sv = Server(QWEN, *args, log_level="info", env={"EDDY_EMU_GPU_MIB": emulated_gpu_mib(args, 3)})
    try:
        p = sv.port
        check(any(re.search(r"listening on .*, on cuda: ", ln) for ln in sv.lines), "the device in the first line: %s"
              % [ln for ln in sv.lines if "listening" in ln])
        check(any("the snapshot states share 3 KV blocks" in ln for ln in sv.lines),
              "the emulated GPU's size: %s" % [ln for ln in sv.lines if "GPU" in ln])
        words = ("river stone light garden window paper silver morning quiet forest letter orange music winter "
                 "bridge candle mountain yellow harbor pencil").split()
        prompts = {}
        for i, sid in enumerate("abc"):
            rng = random.Random(i)
            text = " ".join(rng.choice(words) for _ in range(600))
            _, _, t = post(p, "/tokenize", {"content": text})
            n = len(t["tokens"])
            prompts[sid] = text[:int(len(text) * 600 / n)]  # about 600 tokens: 3 blocks with the answer

        def ask(sid, prompt):
            s, _, j = post(p, "/v1/completions", {"prompt": prompt, "max_tokens": 4, "temperature": 0,
                                                  "session_id": sid}, timeout=300)
            want = eddy_run(QWEN, prompt, "-n", "4", "--temp", "0")
            check(s == 200 and j["choices"][0]["text"] == want, "session %s: %s %r against eddy run's %r" %
                  (sid, s, j if s != 200 else j["choices"][0]["text"], want))
            return j if s == 200 else None

        answers = {sid: ask(sid, prompts[sid]) for sid in "abc"}
        dropped = [ln for ln in sv.lines if "dropped the pinned session" in ln]
        check(len(dropped) == 1 and '"a"' in dropped[0], "the sessions dropped for c: %s" % dropped)
        # b goes on from its pinned state; a, dropped, from nothing, and drops c (b was used since)
        for sid in "ba":
            if not answers[sid]:
                continue
            j = ask(sid, prompts[sid] + answers[sid]["choices"][0]["text"] + " river stone")
            cached = j["usage"]["prompt_tokens_details"]["cached_tokens"] if j else -1
            check(cached >= answers[sid]["usage"]["prompt_tokens"] + 3 if sid == "b" else cached == 0,
                  "session %s's next turn restored %d positions" % (sid, cached))
        dropped = [ln for ln in sv.lines if "dropped the pinned session" in ln]
        m = metrics(p)
        check(len(dropped) == 2 and '"c"' in dropped[1] and m["eddy_sessions_dropped_total"] == 2,
              "the sessions dropped: %s, /metrics %s" % (dropped, m.get("eddy_sessions_dropped_total")))
        check(not any("a step failed" in ln for ln in sv.lines), "a step failed: %s" % sv.lines[-3:])
    finally:
        check(sv.stop() == 0, "gpu server exit: %s" % sv.lines[-3:])

    # a GPU without room for the default prefix cache (4096 MiB) beside the model: a smaller one; a budget
    # given with --cache-ram that does not fit is an error naming it
    sv = Server(QWEN, "-ngl", "99", env={"EDDY_EMU_GPU_MIB": "256"})
    try:
        warn = [ln for ln in sv.lines if "prefix cache's default" in ln]
        check(len(warn) == 1 and "4096 MiB" in warn[0] and "--cache-ram" in warn[0], "the cache made to fit: %s" % warn)
        s, _, j = post(sv.port, "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0})
        check(s == 200 and j["choices"][0]["text"] == eddy_run(QWEN, "Once upon a time", "-n", "4", "--temp", "0"),
              "an answer with the smaller cache: %s %s" % (s, j))
        m = metrics(sv.port)
        check(0 < m["eddy_cache_budget_bytes"] < 4096 << 20, "the cache's budget: %s" % m["eddy_cache_budget_bytes"])
    finally:
        check(sv.stop() == 0, "gpu server exit: %s" % sv.lines[-3:])
    # a GPU that faults (the emulator's EDDY_EMU_FAIL_FILE, once the file exists): the running request ends with 500
    # naming the error; the requests after it get 503, and /health too (the engine's states are lost); tokenizing
    # still works, and the server stops cleanly
    flag = os.path.join(tempfile.mkdtemp(), "fault")
    sv = Server(QWEN, "-ngl", "99", "--cache-ram", "0", env={"EDDY_EMU_FAIL_FILE": flag})
    try:
        body = {"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0}
        s, _, j = post(sv.port, "/v1/completions", body)
        check(s == 200, "before the fault: %s %s" % (s, j))
        open(flag, "w").close()
        s, _, j = post(sv.port, "/v1/completions", body)
        check(s == 500 and is_error_object(j, 500) and "illegal memory access" in j["error"]["message"],
              "the request the fault hit: %s %s" % (s, j))
        s, _, j = post(sv.port, "/v1/completions", body)
        check(s == 503 and is_error_object(j, 503) and "GPU failed" in j["error"]["message"] and
              "illegal memory access" in j["error"]["message"], "a request after the fault: %s %s" % (s, j))
        s, _, b = request(sv.port, "GET", "/health")
        check(s == 503 and b"GPU failed" in b, "/health after the fault: %s %s" % (s, b[:200]))
        s, _, j = post(sv.port, "/tokenize", {"content": "Once upon a time"})
        check(s == 200 and j.get("tokens"), "/tokenize after the fault: %s %s" % (s, j))
    finally:
        check(sv.stop() == 0, "exit after the fault: %s" % sv.lines[-3:])
    r = subprocess.run([EDDY, "serve", "-m", QWEN, "--port", "0", "-ngl", "99", "--cache-ram", "1024"],
                       env=dict(os.environ, EDDY_EMU_GPU_MIB="256"), capture_output=True, timeout=60)
    err = r.stderr.decode()
    check(r.returncode == 1 and "cannot allocate" in err and "--cache-ram" in err, "--cache-ram 1024 in 256 MiB: "
          "exit %d, %s" % (r.returncode, err[-300:]))

    # the model split (-ngl 2: its last 2 of 4 layers on the GPU): two conversations at once, each answer
    # eddy run's on the CPU, and the second turn of one goes on from its pinned session (its snapshot's state
    # on both sides of the split)
    sv = Server(QWEN, "-ngl", "2", "-np", "2", "--cache-ram", "64")
    try:
        p = sv.port
        check(any(re.search(r"listening on .*, on cuda: .*\(layers 2\.\.3; the CPU runs 0\.\.1\)", ln)
                  for ln in sv.lines), "the split in the first line: %s" % [ln for ln in sv.lines if "listening" in ln])
        prompts = {"x": "Once upon a time there was a river", "y": "The cat sat on the mat and looked at"}
        results = {}

        def turn(sid, prompt):
            s, _, j = post(p, "/v1/completions", {"prompt": prompt, "max_tokens": 6, "temperature": 0,
                                                  "session_id": sid}, timeout=300)
            results[sid] = (s, j, prompt)

        threads = [threading.Thread(target=turn, args=(sid, prompts[sid])) for sid in prompts]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for sid, (s, j, prompt) in sorted(results.items()):
            want = eddy_run(QWEN, prompt, "-n", "6", "--temp", "0")
            check(s == 200 and j["choices"][0]["text"] == want, "split, session %s: %s %r against eddy run's %r" %
                  (sid, s, j if s != 200 else j["choices"][0]["text"], want))
        s, j0, _ = results["x"]
        if s == 200:
            prompt = prompts["x"] + j0["choices"][0]["text"] + " and then"
            s, _, j = post(p, "/v1/completions", {"prompt": prompt, "max_tokens": 6, "temperature": 0,
                                                  "session_id": "x"}, timeout=300)
            want = eddy_run(QWEN, prompt, "-n", "6", "--temp", "0")
            cached = j["usage"]["prompt_tokens_details"]["cached_tokens"] if s == 200 else -1
            check(s == 200 and j["choices"][0]["text"] == want and cached >= j0["usage"]["prompt_tokens"],
                  "split, session x's next turn: %s %r (restored %d) against eddy run's %r" %
                  (s, j if s != 200 else j["choices"][0]["text"], cached, want))
    finally:
        check(sv.stop() == 0, "split server exit: %s" % sv.lines[-3:])


for part in PARTS:
    try:
        {"api": part_api, "load": part_load, "hostile": part_hostile, "shutdown": part_shutdown,
         "spec": part_spec, "gpu": part_gpu}[part]()
    except Exception as e:  # noqa: BLE001 - a crash of the test is a failure
        import traceback
        traceback.print_exc()
        bad("%s part raised %r" % (part, e))

print("%d passed, %d failed" % (PASS, FAIL))
sys.exit(1 if FAIL else 0)

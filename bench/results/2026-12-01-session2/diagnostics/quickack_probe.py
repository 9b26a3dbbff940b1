"""The delayed-ACK stall against ../shared/bench/mock_llm.py, without any framework.

10 chat completions on one kept-alive connection, once plainly and once setting TCP_QUICKACK
after every recv (what crewai-llm's transport now does). Start the mock on port 18901 first.
Observed on this machine (ms per call; the first call of a fresh connection is fast either way):
    plain    [8.8, 43.3, 43.9, 51.9, 48.0, 47.9, 48.0, 44.0, 46.1, 43.8]
    quickack [10.4, 0.7, 0.3, 0.3, 4.1, 0.5, 0.3, 0.6, 4.2, 0.4]
"""
import socket, time, json, sys
body = json.dumps({"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}).encode()
req = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body
def run(qa):
    s = socket.create_connection(("127.0.0.1", 18901)); s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    ts=[]
    for i in range(10):
        t=time.perf_counter(); s.sendall(req); buf=b""
        while True:
            d = s.recv(65536)
            if qa: s.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
            buf += d
            if b"\r\n\r\n" in buf:
                h, b = buf.split(b"\r\n\r\n",1)
                cl = int([l.split(b":")[1] for l in h.split(b"\r\n") if l.lower().startswith(b"content-length")][0])
                if len(b) >= cl: break
        ts.append(round((time.perf_counter()-t)*1000,1))
    print("quickack" if qa else "plain", ts)
run(False); run(True)

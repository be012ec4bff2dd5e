#!/usr/bin/env python3
"""pysidecar: a Reasonix Extension Protocol v1 conformance fixture (Python 3 stdlib only).
Written from PROTOCOL.md alone: JSON-RPC 2.0 over NDJSON on stdin/stdout (§2); diagnostics
go to stderr only, which is not part of the protocol (§1.1, §2)."""
import base64, hashlib, json, os, re, sys, traceback

NAME, VERSION, PROTOCOL_ID = "pysidecar", "0.1.0", "reasonix.extension.v1"  # §1.3
FRAME_BYTES = 8388608  # §1.3 frameBytes, counting the terminating "\n"
MAX_DEPTH = 10000      # §2.2: nesting deeper than 10000 levels is refused
SUFFIX = "\n[checked by pysidecar]"
SUBSCRIPTIONS = ["input.receive", "tool.before", "tool.after", "permission.decision",
                 "session.start", "session.end"]
RULED = {"input.receive", "tool.before", "tool.after", "permission.decision"}
REASONS = {  # §8.2 frozen table (the reasons used here): code, retryable, frozen message
    "frame_too_large": (-32000, False, "The frame exceeds the frozen protocol size limit."),
    "content_ref_expired": (-32000, True, "The referenced content has expired."),
    "internal": (-32603, True, "An internal extension protocol error occurred."),
    "invalid_params": (-32602, False, "The params do not match the registered method schema."),
    "protocol_error": (-32600, False, "The extension protocol frame or envelope is invalid."),
    "unknown_method": (-32601, False, "The method is not registered in Extension Protocol v1."),
    "unsupported_version": (-32000, False, "The peer's extension protocol version is not supported.")}

# --- strict JSON (§2.2 D3) -------------------------------------------------------------
class Int(int): pass    # an integer literal; .raw keeps its text (to spot -0, re-emit as is)
class Num(float): pass  # a number with a fraction or exponent: never an integer member
class JObj(dict): dup = None  # .dup: first repeated member name, by decoded value (§2.2)
def _literal(cls, conv):
    def make(text): o = cls(conv(text)); o.raw = text; return o
    return make
def _pairs(pairs):
    o, names = JObj(pairs), [k for k, _ in pairs]
    if len(o) < len(names): o.dup = next(k for i, k in enumerate(names) if k in names[:i])
    return o
def _no_constant(name): raise ValueError(f"{name} is not JSON")  # RFC 8259: no NaN/Infinity
def parse(text):  # raises ValueError (syntax, trailing data, BOM) or RecursionError
    return json.loads(text, object_pairs_hook=_pairs, parse_constant=_no_constant,
                      parse_int=_literal(Int, int), parse_float=_literal(Num, float))

def scan(v):
    """(deepest nesting level, first duplicate member at any depth), iteratively."""
    depth, dup, stack = 0, None, [(v, 1)]
    while stack:
        x, d = stack.pop()
        if isinstance(x, (dict, list)):
            depth = max(depth, d)
            if isinstance(x, dict):
                dup = x.dup if dup is None else dup
                x = x.values()
            stack.extend((c, d + 1) for c in x)
    return depth, dup

def enc(v):
    """Compact strict JSON; raises on anything (a float, so never NaN) not parsed by us."""
    if v is None or isinstance(v, bool): return {None: "null", True: "true", False: "false"}[v]
    if isinstance(v, (Int, Num)): return v.raw  # numbers travel back exactly as written
    if isinstance(v, int): return str(v)
    if isinstance(v, str):
        s = json.dumps(v, ensure_ascii=False)
        try: s.encode("utf-8"); return s
        except UnicodeEncodeError: return json.dumps(v)  # lone surrogates stay \u-escaped
    if isinstance(v, dict): return "{" + ",".join([enc(k) + ":" + enc(x) for k, x in v.items()]) + "}"
    if isinstance(v, list): return "[" + ",".join([enc(x) for x in v]) + "]"
    raise TypeError(f"cannot encode {type(v).__name__}")

# --- closed documents (§2.2, §3.3, §3.6, §4.1, §4.2, §6.2); "name!" = required --------
STR, TEXT, BOOL, OBJ, ANY, U64, SHA = "str", "text", "bool", "obj", "any", "u64", "sha"
INT0, INT1, INT = ("int", 0), ("int", 1), ("int", -2**63)  # (integer, minimum)
SESSION = {"sessionPath": STR, "phase": frozenset({"start", "end", "load", "save", "rotate"})}
TOOL = {"name": STR, "arguments": STR}
PAYLOADS = {  # §4.1 payload documents: every member optional except provider.request's
    "agent.before_start": {"model": STR, "toolCount": INT, "sessionId": STR},
    "compaction.complete": {"summary": STR}, "context.prepare": {"messages": [OBJ]},
    "compaction.prepare": {"messages": [OBJ], "guidance": STR},
    "frontend.event": {"kind": STR, "text": STR, "detail": STR}, "input.receive": {"text": STR},
    "permission.decision": dict(TOOL, readOnly=BOOL, hostDecision=frozenset({"allow", "deny"})),
    "provider.request": {"request!": OBJ},
    "provider.response": {"text": STR, "reasoning": STR, "signature": STR, "calls": [OBJ],
                          "usage": OBJ},
    "system_prompt.build": {"prompt": STR, "workspaceRoot": STR},
    "tool.after": dict(TOOL, result=STR, isError=BOOL), "tool.before": TOOL}
PAYLOADS.update({"session." + p: SESSION for p in SESSION["phase"]})
POINTS = frozenset(PAYLOADS)  # the 17 hook points
INITIALIZE = {"protocolVersion!": STR, "protocolId!": STR,
              "manifest!": {k: [STR] for k in ("intercepts", "replaces", "providers", "uiActions",
                                               "capabilities")},
              "session!": {"sessionId!": TEXT, "workspaceRoot!": TEXT, "generation!": U64},
              "capabilities!": {"contentRefs!": BOOL, "protocolVersion": STR,
                                "uiHost": frozenset({"acp", "desktop", "headless", "tui"})}}
EXTERNALIZED = [{"jsonPointer!": TEXT, "contentRef!": TEXT, "totalBytes!": INT0, "sha256!": SHA}]
INTERCEPT = {"event!": POINTS, "seq!": INT1, "payload!": ANY, "timeoutMillis!": INT0,
             "externalized": EXTERNALIZED}
EVENT = {"event!": POINTS, "payload!": ANY, "externalized": EXTERNALIZED}
SCALARS = {STR: ("a string", lambda v: isinstance(v, str)),
           BOOL: ("a boolean", lambda v: type(v) is bool),
           TEXT: ("a non-blank string", lambda v: isinstance(v, str) and v.strip()),  # minLength 1
           OBJ: ("an object", lambda v: isinstance(v, dict)),
           SHA: ("64 lowercase hex", lambda v: isinstance(v, str) and re.fullmatch("[0-9a-f]{64}", v))}
class Invalid(Exception): pass

def check(v, spec, at=""):
    def bad(why): return Invalid(f"at {at or '/'}: {why}")
    if spec == ANY: return
    if isinstance(spec, dict):  # closed object: unknown (and case-variant) names refused
        if not isinstance(v, dict): raise bad("expected an object")
        names = {k.rstrip("!"): k.endswith("!") for k in spec}
        for k in v:
            if k not in names: raise bad(f"unknown member {k!r}")
        for k, sub in spec.items():
            name = k.rstrip("!")
            if name in v: check(v[name], sub, f"{at}/{name}")
            elif names[name]: raise bad(f"missing required member {name!r}")
    elif isinstance(spec, list):
        if not isinstance(v, list): raise bad("expected an array")
        for i, x in enumerate(v): check(x, spec[0], f"{at}/{i}")
    elif isinstance(spec, frozenset):  # enum; "" is never a value
        if not (isinstance(v, str) and v in spec): raise bad("not one of the allowed values")
    elif isinstance(spec, tuple):  # integer literal: no fraction/exponent, int64, >= minimum
        if not (type(v) is Int and spec[1] <= v < 2**63): raise bad(f"expected an integer >= {spec[1]}")
    elif spec == U64:  # generation: unsigned 64-bit, any sign (-0 too) refused
        if not (type(v) is Int and v.raw[0] != "-" and v < 2**64): raise bad("expected an unsigned integer")
    elif not SCALARS[spec][1](v): raise bad(f"expected {SCALARS[spec][0]}")  # null never matches

def validate(params, spec, what):
    dup = scan(params)[1]  # duplicates are refused at every depth, free-form members too
    if dup is not None: raise Invalid(f"invalid {what}: duplicate member {dup!r}")
    try: check(params, spec)
    except Invalid as e: raise Invalid(f"invalid {what}: {what} {e}") from None
    return params

# --- output (§2.1: one compact line, flushed at once; §8.1 D7 error data) -------------
def log(msg): print(f"pysidecar: {msg}", file=sys.stderr, flush=True)
def send(frame):
    data = enc(frame).encode("utf-8") + b"\n"
    if len(data) > FRAME_BYTES:  # §2.1, §8.4: the small -32603 instead, without data
        data = enc({"jsonrpc": "2.0", "id": frame["id"], "error": {
            "code": -32603, "message": "response exceeds frame size limit"}}).encode() + b"\n"
    sys.stdout.buffer.write(data); sys.stdout.buffer.flush()
def reply(rid, result): send({"jsonrpc": "2.0", "id": rid, "result": result})
def fail(rid, reason, message=None, code=None):
    c, retryable, frozen = REASONS[reason]
    send({"jsonrpc": "2.0", "id": rid, "error": {"code": code or c, "message": message or frozen,
          "data": {"reason": reason, "retryable": retryable}}})

# --- verdicts (§4.4 D16) and replacement rules (§4.1) ---------------------------------
CONTINUE = {"decision": "continue"}
def replace(doc): return {"decision": "replace", "replacement": doc}

def tool_args(s):
    """Tool arguments: "" or the text of one JSON object, read as strictly as a frame (§4.1)."""
    if s == "": return JObj()
    try: v = parse(s)
    except (ValueError, RecursionError): return None
    return v if isinstance(v, dict) and scan(v)[1] is None and scan(v)[0] <= MAX_DEPTH else None

def decide(point, p):
    name = p.get("name", "")
    if point == "input.receive":
        text = p.get("text", "")
        if text.startswith("/fs ") and text[4:].strip():  # replacement text must not be blank
            return replace({"text": text[4:].upper()})
    elif point == "tool.before":
        if name == "dangerous_exec":
            return {"decision": "block", "reason": "pysidecar blocks dangerous_exec"}
        args = tool_args(p.get("arguments", "")) if name == "write" else None
        if args is not None:
            args.pop("dryRun", None); args["dryRun"] = True  # added as the last member
            return replace({"name": "write", "arguments": enc(args)})
    elif point == "tool.after":  # a replacement is the whole new document (§4.1)
        if name.strip() and tool_args(p.get("arguments", "")) is not None:
            return replace(dict(p, result=p.get("result", "") + SUFFIX))
    elif point == "permission.decision":
        if p.get("readOnly") is True:
            return {"decision": "allow", "reason": "pysidecar allows read-only tools"}
        if name == "rm": return {"decision": "deny", "reason": "pysidecar never allows rm"}
    return CONTINUE  # no rule: continue (§4.2)

def resolve_payload(p, kind):
    """§6.2 steps 1-4; returns the inline payload, or None when it is externalized."""
    ext, payload = p.get("externalized"), p["payload"]
    if not ext:
        if payload is None: raise Invalid(f"invalid {kind}: inline null payload without a descriptor")
        try: check(payload, PAYLOADS[p["event"]], "/payload")  # §2.2: payloads are strict too
        except Invalid as e: raise Invalid(f"invalid {kind}: {p['event']} payload {e}") from None
        return payload
    if payload is not None or len(ext) != 1 or ext[0]["jsonPointer"] != "/payload":
        raise ValueError("externalized payload must be null with exactly one /payload descriptor")
    if ext[0]["totalBytes"] > FRAME_BYTES: raise OverflowError("content object over 8388608 bytes")
    return None

# --- content refs (§6.2 steps 6-9, §6.3) ------------------------------------------------
PAGE_BYTES = 262144
class Refused(Exception):  # a protocol error to answer with: (reason, message)
    def __init__(self, reason, message): super().__init__(message); self.reason = reason
state_calls = {"next": 0, "answers": {}}
def call(method, params):
    """Sends our own request (ids from 1, §2.3) and serves every other frame until its
    answer arrives: a sidecar keeps reading and answering while it waits (§2.5, §6.3)."""
    state_calls["next"] += 1; rid = state_calls["next"]
    send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
    while rid not in state_calls["answers"]: on_line(read_line())
    answer = state_calls["answers"].pop(rid)
    if "error" in answer:
        err = answer["error"] if isinstance(answer["error"], dict) else {}
        data = err.get("data") if isinstance(err.get("data"), dict) else {}
        raise Refused(data.get("reason") if data.get("reason") in REASONS else "internal", str(err.get("message", "")))
    return answer["result"]

def read_content(d):
    """The whole object of one descriptor, page by page from offset 0, every page checked."""
    data, off, total = b"", 0, d["totalBytes"]
    def bad(why): return Refused("protocol_error", f"content {d['contentRef']}: {why}")
    while True:
        r = call("host/content/read", {"contentRef": d["contentRef"], "offset": off})
        if not isinstance(r, dict) or r.get("contentRef") != d["contentRef"] or r.get("offset") != off:
            raise bad("the page does not echo the ref and offset asked for")
        if r.get("encoding") != "utf8" or r.get("totalBytes") != total or r.get("sha256") != d["sha256"]:
            raise bad("the page's encoding, totalBytes or sha256 is not the descriptor's")
        try: page = base64.b64decode(r.get("dataBase64", ""), validate=True)
        except (ValueError, TypeError): raise bad("dataBase64 does not decode") from None
        if len(page) > PAGE_BYTES: raise bad("a page holds more than 262144 bytes")
        data += page
        if "nextOffset" not in r: break
        if r["nextOffset"] != off + len(page) or not page: raise bad("nextOffset is not offset plus the page")
        off = r["nextOffset"]
    if len(data) != total or hashlib.sha256(data).hexdigest() != d["sha256"]:
        raise bad("the bytes read do not match totalBytes and sha256")
    try: return parse(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError): raise bad("the content is not JSON text") from None

# --- dispatch --------------------------------------------------------------------------
state = {"initialized": False, "barrier": False, "events": None}
def fatal(rid, reason, message):  # §3.3: refuse the version, then exit non-zero
    fail(rid, reason, message); os._exit(1)

def on_request(rid, method, params):
    if method == "extension/shutdown":  # §3.6: served in every phase, before the barrier too
        validate(params, {"timeoutMillis!": INT0}, "ShutdownParams")
        reply(rid, {"accepted": True})  # nothing to clean up; written and flushed
        os._exit(0)
    if method == "extension/initialize":
        if state["initialized"]:  # §3.4: the handshake happens once per connection
            return fail(rid, "protocol_error", "invalid request: extension/initialize was already answered")
        p = validate(params, INITIALIZE, "InitializeParams")  # invalid_params: connection stays
        pid, pv = p["protocolId"], p["protocolVersion"]  # §3.3 the version check
        if pid != PROTOCOL_ID:
            fatal(rid, "unsupported_version", f"this sidecar speaks {PROTOCOL_ID}, the host sent {pid!r}")
        if not re.fullmatch(r"[+-]?[0-9]+", pv):
            fatal(rid, "protocol_error", f"protocolVersion {pv!r} is not a decimal integer")
        if int(pv) != 1:
            fatal(rid, "unsupported_version", f"this sidecar speaks protocol major 1, the host sent {int(pv)}")
        subs = [s for s in SUBSCRIPTIONS if s in p["manifest"].get("intercepts", [])]  # D9
        result = {"protocolVersion": "1", "name": NAME, "version": VERSION}
        if subs: result["subscriptions"] = subs
        result["stateSchemaVersion"] = 0
        reply(rid, result)
        state["initialized"] = True
        return
    if not state["barrier"]:  # §3.4 sidecar side: only initialize and shutdown before it
        return fail(rid, "protocol_error", f"invalid request: {method} before extension/initialized")
    if method != "extension/intercept":  # §2.6, §8.1: unknown or unserved
        return fail(rid, "unknown_method", f"method not found: {method}")
    p = validate(params, INTERCEPT, "InterceptParams")
    try: payload = resolve_payload(p, "InterceptParams")
    except ValueError as e: return fail(rid, "protocol_error", str(e))
    except OverflowError as e: return fail(rid, "frame_too_large", str(e))
    if payload is None:  # §6.2: read it back, then judge it like an inline one
        try: payload = read_content(p["externalized"][0])
        except Refused as e: return fail(rid, e.reason, str(e))
        try: check(payload, PAYLOADS[p["event"]], "/payload")
        except Invalid as e: raise Invalid(f"invalid InterceptParams: externalized payload {e}") from None
    reply(rid, decide(p["event"], payload))

def on_notification(method, params, raw):  # §2.6: never answered, not even with an error
    try:
        if method == "extension/initialized":
            if not state["initialized"]: return  # §3.4: dropped, does not open the barrier
            validate(params, {}, "InitializedParams")
            state["barrier"] = True  # §3.4: open before any later frame is processed
        elif state["barrier"] and method == "extension/event":  # §4.8: observe only
            resolve_payload(validate(params, EVENT, "EventParams"), "EventParams")
            path = os.environ.get("PYSIDECAR_EVENTS")
            if path:  # the frame exactly as received, one per line
                if state["events"] is None: state["events"] = open(path, "ab")
                state["events"].write(raw + b"\n"); state["events"].flush()
        # anything else, and every notification before the barrier (§3.4): dropped silently
    except Exception as e:
        log(f"dropped {method} notification: {e}")  # §2.2: a failed notification is dropped

def on_line(line):
    raw = line[:-1] if line.endswith(b"\n") else line
    body = (raw[:-1] if raw.endswith(b"\r") else raw).strip(b" \t")  # §2.1 D2
    if not body: return  # empty lines are ignored
    try: text = body.decode("utf-8")
    except UnicodeDecodeError: return fail(None, "protocol_error", "invalid request: frame is not valid UTF-8")
    try:
        msg = parse(text)
        if scan(msg)[0] > MAX_DEPTH: raise ValueError("nesting deeper than 10000 levels")
    except (ValueError, RecursionError) as e:  # §2.4: not JSON at all
        return fail(None, "protocol_error", f"parse error: {e}", code=-32700)
    # §2.4, the malformed-frame table in order
    if not isinstance(msg, dict): return fail(None, "protocol_error", "invalid request: frame is not a JSON object")
    if msg.dup is not None: return fail(None, "protocol_error", f"invalid request: duplicate member {msg.dup!r}")
    if "method" not in msg:
        if {"result", "error", "id"} & msg.keys():  # response-shaped: never answered (D4)
            rid = msg.get("id")
            if type(rid) is Int and 0 < rid <= state_calls["next"] and ("result" in msg) != ("error" in msg):
                state_calls["answers"][int(rid)] = msg; return
            return log("dropped a response to no pending request of ours")
        return fail(None, "protocol_error", "invalid request: neither method nor id")
    has_id, rid = "id" in msg, msg.get("id")
    if has_id and not (type(rid) is Int and rid.raw != "-0" and -2**63 <= rid < 2**63):  # D4
        return fail(None, "protocol_error", "invalid request: id must be an integer")
    echo, method, params = (rid if has_id else None), msg["method"], msg.get("params", JObj())
    jsonrpc_ok = type(msg.get("jsonrpc")) is str and msg["jsonrpc"] == "2.0"
    for bad, why in ((not jsonrpc_ok, 'jsonrpc must be "2.0"'),
                     ("result" in msg or "error" in msg, "a request carries no result or error"),
                     (not isinstance(method, str) or method == "", "method must be a non-empty string"),
                     (not isinstance(params, dict), "params must be an object")):  # D5: absent = {}
        if bad: return fail(echo, "protocol_error", "invalid request: " + why)
    if not has_id: return on_notification(method, params, raw)
    try: on_request(rid, method, params)
    except Invalid as e: fail(rid, "invalid_params", str(e))
    except Exception:  # §8.3: the frozen internal error; the detail stays in our log
        log(traceback.format_exc()); fail(rid, "internal")

def read_line():
    line = sys.stdin.buffer.readline(FRAME_BYTES)  # never hold more than one frame
    if not line: os._exit(0)  # §3.6: end of file on stdin -> exit 0
    if not line.endswith(b"\n") and len(line) >= FRAME_BYTES:  # D2: oversized, fatal
        fail(None, "frame_too_large", f"inbound frame exceeds {FRAME_BYTES} bytes including its newline")
        os._exit(1)  # §3.6: a fatal connection failure exits non-zero
    return line

def main():
    sys.setrecursionlimit(50000)  # json's decoder recurses; §2.2 allows 10000 levels
    while True: on_line(read_line())

if __name__ == "__main__":
    main()

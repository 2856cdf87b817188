"""HTTP client for `autoui serve` (standard library only).

The wire format is the server's: POST /v1/predict takes
``{"goal", "screen" (base64 PNG/JPEG) | "features", "history", "options"}``
and answers the JSON of ``autoui predict --json`` plus ``serve`` (queue and
batch info). Errors are ``{"error": str, "kind": str}``.
"""

from __future__ import annotations

import base64
import errno
import http.client
import json
import math
import numbers
import random
import re
import socket
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from .images import encode_screen

try:
    import ssl
except ImportError:  # a Python built without OpenSSL: no https
    ssl = None  # type: ignore[assignment]

__all__ = [
    "ACTION_NUMBERS",
    "ACTION_TYPES",
    "NO_POINT",
    "Action",
    "AutouiError",
    "Client",
    "Prediction",
]

#: Auto-UI's action types, as the server names them.
ACTION_TYPES = (
    "DUAL_POINT",
    "TYPE",
    "PRESS_BACK",
    "PRESS_HOME",
    "PRESS_ENTER",
    "STATUS_TASK_COMPLETE",
    "STATUS_TASK_IMPOSSIBLE",
)

#: AITW's action numbers (``action_type`` 4 is DUAL_POINT), as the server takes them.
ACTION_NUMBERS = {
    3: "TYPE",
    4: "DUAL_POINT",
    5: "PRESS_BACK",
    6: "PRESS_HOME",
    7: "PRESS_ENTER",
    10: "STATUS_TASK_COMPLETE",
    11: "STATUS_TASK_IMPOSSIBLE",
}

#: The point of an action that has none.
NO_POINT: Tuple[float, float] = (-1.0, -1.0)

#: |lift - touch| (normalized, Euclidean) at or below which a DUAL_POINT is a tap
#: (Auto-UI's action matching rule).
TAP_DISTANCE = 0.04

Point = Tuple[float, float]


class AutouiError(Exception):
    """An error answer from the server, or no usable answer at all.

    ``status`` is the HTTP status (None when no response came: then ``kind`` is
    "timeout", or "connection" for a refused, reset or closed connection, a TLS
    or HTTP protocol error, an unreachable network or a host that does not
    resolve); ``kind`` is the server's stable word for the error (bad_request,
    unauthorized, not_found, too_large, unsupported_media_type, queue_full,
    not_ready, shutting_down, deadline, internal), or "bad_answer" for a 200
    answer that is not a prediction; ``message`` is the server's text, one line
    (control characters and runs of white space made one space, cut at 200
    bytes). ``retry_after`` is the answer's Retry-After in seconds, None when
    it had none.
    """

    def __init__(self, status: Optional[int], kind: str, message: str, retry_after: Optional[float] = None):
        super().__init__(f"autoui: {status if status is not None else '-'} {kind}: {message}")
        self.status = status
        self.kind = kind
        self.message = message
        self.retry_after = retry_after


# What the server's readers take (action/types.go ParseType, action/parse.go
# parsePoint): Go's strings.TrimSpace, strconv.Atoi and its plain decimal literals.
_GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
_INT = re.compile(r"[+-]?[0-9]+\Z")
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")


def _action_type(t: Any) -> str:
    """An action type as the server reads it: a name in any case ("DUAL_POINT",
    "press_home"; surrounding spaces ignored) or an AITW number (4, or "4")."""
    name = None
    if isinstance(t, numbers.Integral) and not isinstance(t, bool):
        name = ACTION_NUMBERS.get(int(t))
    elif isinstance(t, str):
        s = t.strip(_GO_SPACE)
        if _INT.match(s):
            name = ACTION_NUMBERS.get(int(s))
        else:
            # Go's strings.EqualFold: ASCII case, and the two letters whose simple
            # case folding reaches ASCII (U+017F long s, U+212A Kelvin sign, which
            # str.lower() maps to "k" already).
            folded = s.replace("\u017f", "s").lower()
            name = next((n for n in ACTION_TYPES if n.lower() == folded), None)
    if name is None:
        raise ValueError(
            f"unknown action_type {t!r} (want one of {', '.join(ACTION_TYPES)}, in any case, "
            f"or its AITW number {', '.join(map(str, ACTION_NUMBERS))})"
        )
    return name


def _point(p: Any) -> Point:
    """A [y, x] point: two numbers, Auto-UI's string form "[y, x]" (or "(y, x)"),
    or None for none."""
    if p is None:
        return NO_POINT
    if isinstance(p, str):  # Auto-UI's own string form "[y, x]"
        s = p.strip()
        if len(s) < 2 or (s[0], s[-1]) not in (("[", "]"), ("(", ")")):
            raise ValueError(f"point {p!r} is not a [y, x] list")
        body = s[1:-1].strip()
        parts = body.split(",") if body else []
        if len(parts) > 1 and not parts[-1].strip():
            parts = parts[:-1]  # a trailing comma
        parts = [q.strip() for q in parts]
        if len(parts) != 2:
            raise ValueError(f"point {p!r} does not hold two numbers")
        for q in parts:
            if not _NUMBER.match(q) or math.isinf(float(q)):
                raise ValueError(f"point {p!r}: bad number {q!r}")
        return (float(parts[0]), float(parts[1]))
    try:
        y, x = p
    except (TypeError, ValueError):
        raise ValueError(f"point {p!r} is not a [y, x] pair") from None
    for v in (y, x):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise ValueError(f"point {p!r}: {v!r} is not a number")
    return (float(y), float(x))


@dataclass(frozen=True)
class Action:
    """One Auto-UI action. Points are normalized [0, 1] (y, x) with the origin at
    the top left; actions without points carry (-1.0, -1.0)."""

    action_type: str
    touch_point: Point = NO_POINT
    lift_point: Point = NO_POINT
    typed_text: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "action_type", _action_type(self.action_type))
        object.__setattr__(self, "touch_point", _point(self.touch_point))
        object.__setattr__(self, "lift_point", _point(self.lift_point))
        object.__setattr__(self, "typed_text", str(self.typed_text or ""))

    @classmethod
    def tap(cls, y: float, x: float) -> "Action":
        """A tap at (y, x): DUAL_POINT with touch == lift."""
        return cls("DUAL_POINT", (y, x), (y, x))

    @classmethod
    def swipe(cls, touch_y: float, touch_x: float, lift_y: float, lift_x: float) -> "Action":
        """A finger swipe from (touch_y, touch_x) to (lift_y, lift_x)."""
        return cls("DUAL_POINT", (touch_y, touch_x), (lift_y, lift_x))

    @classmethod
    def type(cls, text: str) -> "Action":
        return cls("TYPE", typed_text=text)

    @classmethod
    def back(cls) -> "Action":
        return cls("PRESS_BACK")

    @classmethod
    def home(cls) -> "Action":
        return cls("PRESS_HOME")

    @classmethod
    def enter(cls) -> "Action":
        return cls("PRESS_ENTER")

    @classmethod
    def complete(cls) -> "Action":
        return cls("STATUS_TASK_COMPLETE")

    @classmethod
    def impossible(cls) -> "Action":
        return cls("STATUS_TASK_IMPOSSIBLE")

    @classmethod
    def from_json(cls, obj: Dict[str, Any]) -> "Action":
        """An action from its JSON object, read as the server reads one:
        ``action_type`` a name in any case or an AITW number (4 or "4"); points
        [y, x] arrays or Auto-UI's "[y, x]" strings, missing ones (-1, -1),
        except that a DUAL_POINT needs its touch point and without a lift point
        is a tap there. Other keys are ignored (``history`` refuses them)."""
        if obj.get("action_type") is None:
            raise ValueError(f"action {obj!r}: missing action_type")
        t = _action_type(obj["action_type"])
        touch, lift = obj.get("touch_point"), obj.get("lift_point")
        if t == "DUAL_POINT":
            if touch is None:
                raise ValueError(f"action {obj!r}: DUAL_POINT needs touch_point")
            if lift is None:
                lift = touch
        text = obj.get("typed_text")
        if text is not None and not isinstance(text, str):
            raise ValueError(f"action {obj!r}: typed_text {text!r} is not a string")
        return cls(t, touch, lift, text or "")

    def clamped(self) -> "Action":
        """The action as a device performs it, and as it goes back as history:
        each coordinate in [0, 1], -1 (none) kept. An unconstrained model may
        say 1.5; the server refuses a history point outside [0, 1]."""

        def c(p: Point) -> Point:
            return tuple(v if v == -1 else min(max(v, 0.0), 1.0) for v in p)  # type: ignore[return-value]

        return Action(self.action_type, c(self.touch_point), c(self.lift_point), self.typed_text)

    def to_json(self) -> Dict[str, Any]:
        """The JSON object the server takes in ``history``."""
        return {
            "action_type": self.action_type,
            "touch_point": [self.touch_point[0], self.touch_point[1]],
            "lift_point": [self.lift_point[0], self.lift_point[1]],
            "typed_text": self.typed_text,
        }

    def distance(self) -> float:
        """Euclidean distance between touch and lift (normalized units)."""
        dy = self.lift_point[0] - self.touch_point[0]
        dx = self.lift_point[1] - self.touch_point[1]
        return (dy * dy + dx * dx) ** 0.5

    def is_tap(self) -> bool:
        """A DUAL_POINT whose touch and lift are within TAP_DISTANCE."""
        return self.action_type == "DUAL_POINT" and self.distance() <= TAP_DISTANCE


@dataclass
class Prediction:
    """A /v1/predict answer. ``error`` is set (and ``action_type`` empty) when the
    model's output did not parse as an action; ``data`` is the whole JSON."""

    action_type: str
    touch_point: Point
    lift_point: Point
    typed_text: str
    plan: List[str]
    raw: str
    tokens: int
    timings_ms: Dict[str, Any]
    source_tokens: int
    source_text: str
    source_ids: List[int]
    output_ids: List[int]
    error: Optional[str] = None
    serve: Optional[Dict[str, Any]] = None
    data: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, obj: Dict[str, Any]) -> "Prediction":
        return cls(
            action_type=obj.get("action_type") or "",
            touch_point=_point(obj.get("touch_point")),
            lift_point=_point(obj.get("lift_point")),
            typed_text=obj.get("typed_text") or "",
            plan=list(obj.get("plan") or []),
            raw=obj.get("raw") or "",
            tokens=int(obj.get("tokens") or 0),
            timings_ms=dict(obj.get("timings_ms") or {}),
            source_tokens=int(obj.get("source_tokens") or 0),
            source_text=obj.get("source_text") or "",
            source_ids=list(obj.get("source_ids") or []),
            output_ids=list(obj.get("output_ids") or []),
            error=obj.get("error") or None,
            serve=obj.get("serve"),
            data=obj,
        )

    @property
    def ok(self) -> bool:
        """Whether the output parsed as an action."""
        return not self.error and self.action_type in ACTION_TYPES

    @property
    def action(self) -> Optional[Dict[str, Any]]:
        """The predicted action as a JSON object (the shape ``history`` takes),
        or None when the output did not parse."""
        return self.to_action().to_json() if self.ok else None

    def to_action(self) -> Action:
        """The predicted action; ValueError when the output did not parse."""
        if not self.ok:
            raise ValueError(f"no action: {self.error or 'empty action_type'} (raw {self.raw!r})")
        return Action(self.action_type, self.touch_point, self.lift_point, self.typed_text)


def _prediction(data: bytes) -> Prediction:
    """A /v1/predict answer; ValueError or TypeError when it is not one."""
    obj = json.loads(data)
    if not isinstance(obj, dict):
        raise ValueError(f"want a JSON object, got {type(obj).__name__}")
    return Prediction.from_json(obj)


HistoryItem = Union[Action, Prediction, Dict[str, Any]]


_ACTION_KEYS = ("action_type", "touch_point", "lift_point", "typed_text")


def _history_json(history: Iterable[HistoryItem]) -> List[Dict[str, Any]]:
    out = []
    for i, item in enumerate(history):
        if isinstance(item, Action):
            a = item
        elif isinstance(item, Prediction):
            a = item.to_action()
        elif isinstance(item, dict):
            unknown = [k for k in item if k not in _ACTION_KEYS]
            if unknown:  # as the server: a misspelt key is not dropped silently
                raise ValueError(f"history[{i}]: unknown key {unknown[0]!r} (want {', '.join(_ACTION_KEYS)})")
            try:
                a = Action.from_json(item)
            except ValueError as e:
                raise ValueError(f"history[{i}]: {e}") from None
        else:
            raise TypeError(f"history item {item!r}: want an Action, a Prediction or a dict")
        for name, point in (("touch_point", a.touch_point), ("lift_point", a.lift_point)):
            for axis, v in zip("yx", point):
                if not math.isfinite(v):
                    raise ValueError(
                        f"history[{i}].{name}: {axis} = {v!r} is not a finite number (JSON has no NaN or Infinity)"
                    )
        out.append(a.to_json())
    return out


def _features_json(features: Any) -> List[float]:
    if hasattr(features, "tolist"):  # numpy array
        features = features.reshape(-1).tolist() if hasattr(features, "reshape") else features.tolist()
    out = [float(v) for v in features]
    if not all(map(math.isfinite, out)):
        i = next(i for i, v in enumerate(out) if not math.isfinite(v))
        raise ValueError(f"features[{i}] = {out[i]!r} is not a finite number (JSON has no NaN or Infinity)")
    return out


#: The longest Retry-After taken, in seconds (the Go client's maxRetryAfter: 100 years).
MAX_RETRY_AFTER = 100 * 365 * 24 * 3600


def _retry_after(value: Optional[str]) -> Optional[float]:
    """Retry-After in seconds, as the Go client reads it: whole seconds (>= 0)
    or an HTTP date, at most MAX_RETRY_AFTER; None when absent or unreadable."""
    if value is None:
        return None
    s = value.strip(_GO_SPACE)
    if _INT.match(s):
        digits = s.lstrip("+-").lstrip("0") or "0"
        # Not int() of it all: a header of thousands of digits is still "a long time".
        seconds = MAX_RETRY_AFTER if len(digits) > 10 else min(int(digits), MAX_RETRY_AFTER)
        if not s.startswith("-") or seconds == 0:
            return float(seconds)
    try:  # an HTTP date
        from email.utils import parsedate_to_datetime

        return min(max(0.0, parsedate_to_datetime(value).timestamp() - time.time()), float(MAX_RETRY_AFTER))
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


#: The most of an answer read (the Go client's maxAnswer): a prediction is a few KB.
MAX_ANSWER = 64 << 20

#: The longest error message taken from an answer, in UTF-8 bytes (the Go client's maxMessage).
MAX_MESSAGE = 200

# Go's unicode.IsControl (C0, DEL, C1) and unicode.IsSpace: what oneLine makes one space.
_BLANK_RUN = re.compile("[\x00-\x1f\x7f-\x9f" + re.escape(_GO_SPACE) + "]+")
_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPED_RUN = re.compile("[\udc80-\udcff]+")


def _one_line(s: Union[str, bytes]) -> str:
    """An answer's text made one line for an error, as the Go client's oneLine:
    control characters and runs of white space (an HTML or plain-text page's
    newlines) become one space, invalid UTF-8 is replaced, and the length is
    capped at MAX_MESSAGE bytes (cut on a character boundary, "..." added)."""
    if isinstance(s, bytes):  # as Go's strings.ToValidUTF8: one U+FFFD for each run of invalid bytes
        s = _ESCAPED_RUN.sub("\ufffd", s.decode("utf-8", "surrogateescape"))
    s = _SURROGATE.sub("\ufffd", s)
    s = _BLANK_RUN.sub(" ", s).strip(" ")
    b = s.encode("utf-8")
    if len(b) <= MAX_MESSAGE:
        return s
    cut = MAX_MESSAGE
    while cut > 0 and b[cut] & 0xC0 == 0x80:  # a UTF-8 continuation byte
        cut -= 1
    return b[:cut].decode("utf-8") + "..."


def _duration(seconds: float) -> str:
    """Seconds as Go prints a time.Duration, roughly: 0.5s, 45s, 1m30s, 277h46m39s."""
    if seconds < 60:
        return f"{seconds:.3g}s"
    h, rest = divmod(int(round(seconds)), 3600)
    m, s = divmod(rest, 60)
    return (f"{h}h" if h else "") + f"{m}m{s}s"


_WANT_URL = "want http://HOST:PORT or https://HOST[:PORT]"
_URL_CONTROL = re.compile(r"[\x00-\x20\x7f]")
_URL_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_HOST_BAD_CHAR = re.compile(r"[{}|\\^`]")


def _base_url(raw: str) -> Tuple[str, urllib.parse.SplitResult]:
    """A server's base URL checked as the Go client's BaseURL does, and without
    trailing slashes: http or https, a host, a port (if any) in 1-65535, no
    query or fragment. ValueError (one line) otherwise: a malformed URL is
    refused here rather than retried until max_wait."""
    if "://" not in raw:
        raise ValueError(f"server URL {raw!r} has no scheme: {_WANT_URL}")
    m = _URL_CONTROL.search(raw)
    if m:
        raise ValueError(f"server URL {raw!r}: invalid character {m.group()!r}")
    m = _URL_BAD_ESCAPE.search(raw)
    if m:
        raise ValueError(f"server URL {raw!r}: invalid URL escape {raw[m.start() : m.start() + 3]!r}")
    try:
        u = urllib.parse.urlsplit(raw)
    except ValueError as e:  # "Invalid IPv6 URL"
        raise ValueError(f"server URL {raw!r}: {e}") from None
    if u.scheme not in ("http", "https"):
        raise ValueError(f"server URL {raw!r}: scheme {u.scheme!r}: {_WANT_URL}")
    if not u.hostname:
        raise ValueError(f"server URL {raw!r} has no host: {_WANT_URL}")
    if "?" in raw or "#" in raw:  # the first ? or # ends the host and the path
        raise ValueError(f"server URL {raw!r}: a base URL takes no query or fragment")
    hostport = u.netloc.rpartition("@")[2]
    m = _HOST_BAD_CHAR.search(hostport)
    if m:
        raise ValueError(f"server URL {raw!r}: invalid character {m.group()!r} in host name")
    if hostport.startswith("["):  # [IPv6]:port
        after = hostport.partition("]")[2]
        if after and not after.startswith(":"):
            raise ValueError(f"server URL {raw!r}: invalid port {after!r} after host")
        port = after[1:]
    else:
        port = hostport.partition(":")[2]
    if port and not (re.fullmatch("[0-9]{1,5}", port) and 1 <= int(port) <= 65535):
        raise ValueError(f"server URL {raw!r}: port {port}: want 1-65535")
    return raw.rstrip("/"), u


#: errno values of a failed attempt that a retry may mend (the Go client's
#: retryable): a connection refused, reset, aborted or closed before the
#: answer (a server restarting), a network or host briefly unreachable.
_RETRIED_ERRNOS = frozenset(
    getattr(errno, n)
    for n in ("ECONNREFUSED", "ECONNRESET", "ECONNABORTED", "EPIPE", "EHOSTUNREACH", "ENETUNREACH")
    if hasattr(errno, n)
)
#: getaddrinfo's "temporary failure in name resolution" (the Go client retries a
#: temporary DNS error, not an unknown host).
_TEMPORARY_DNS = frozenset(getattr(socket, n) for n in ("EAI_AGAIN",) if hasattr(socket, n))
_TIMEOUTS = (socket.timeout, TimeoutError)
#: OpenSSL's reasons when an https:// client meets a plain-HTTP server.
_PLAIN_HTTP_REASONS = ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "HTTP_REQUEST", "PACKET_LENGTH_TOO_LONG")


def _retryable(e: BaseException) -> bool:
    """Whether an attempt that failed with ``e`` (no answer) may succeed if sent
    again, as the Go client's retryable: a timeout, a connection refused, reset,
    aborted or closed before the answer (or the TLS handshake cut short), an
    answer cut short, an unreachable network, a temporary DNS failure. A TLS or
    HTTP protocol error, an unknown host, would fail again."""
    if isinstance(e, _TIMEOUTS):
        return True
    if isinstance(e, socket.gaierror):
        return e.errno in _TEMPORARY_DNS
    if ssl is not None and isinstance(e, ssl.SSLError):
        return isinstance(e, ssl.SSLEOFError)  # the server closed during the handshake
    if isinstance(e, ConnectionError):  # refused, reset, aborted, broken pipe; RemoteDisconnected
        return True
    if isinstance(e, http.client.IncompleteRead):  # the answer was cut short
        return True
    if isinstance(e, OSError):
        return e.errno in _RETRIED_ERRNOS
    return False  # http.client.HTTPException: not an HTTP answer


def _describe(e: BaseException) -> str:
    """A failed attempt's error, one line, saying what kind it is."""
    if isinstance(e, socket.gaierror):
        return f"{'temporary DNS failure' if e.errno in _TEMPORARY_DNS else 'unknown host'}: {e}"
    if ssl is not None and isinstance(e, ssl.SSLError) and not isinstance(e, ssl.SSLEOFError):
        plain = getattr(e, "reason", None) in _PLAIN_HTTP_REASONS
        return f"TLS error: {e}" + (" (is the server plain HTTP? then use http://)" if plain else "")
    if isinstance(e, _TIMEOUTS):
        return str(e) or "timed out"
    if isinstance(e, http.client.HTTPException) and not isinstance(e, (ConnectionError, http.client.IncompleteRead)):
        return f"malformed HTTP answer: {e!r}"
    return _one_line(str(e) or type(e).__name__)


def _attempts(n: int) -> str:
    return "1 attempt" if n == 1 else f"{n} attempts"


def _read(resp: http.client.HTTPResponse) -> bytes:
    """An answer's body, at most MAX_ANSWER + 1 bytes: one byte past the limit
    tells a cut answer from a whole one. IncompleteRead when the connection
    closed before its Content-Length."""
    out = bytearray()
    while len(out) <= MAX_ANSWER:
        chunk = resp.read(min(1 << 20, MAX_ANSWER + 1 - len(out)))
        if not chunk:
            break
        out += chunk
    if len(out) <= MAX_ANSWER and resp.length:  # read(amt) does not say it, read() would
        raise http.client.IncompleteRead(bytes(out), resp.length)
    return bytes(out)


#: Answers that may succeed when sent again (the Go client's Error.Temporary):
#: queue full, loading or shutting down, a proxy that could not reach the server
#: or waited too long, and the server's own 504 deadline.
RETRIED_STATUSES = (429, 502, 503, 504)

_KIND_BY_STATUS = {
    400: "bad_request",
    401: "unauthorized",
    404: "not_found",
    413: "too_large",
    415: "unsupported_media_type",
    429: "queue_full",
    503: "not_ready",
    504: "deadline",
    500: "internal",
}


class Client:
    """A client for one ``autoui serve``.

    ``predict`` retries as the Go client (serve/client) does, with jittered
    exponential backoff (after the server's Retry-After), on what may succeed
    when sent again: 429 queue_full, 502, 503 not_ready/shutting_down and 504
    deadline; a connection refused, reset, aborted or closed before the
    answer; a timeout; an unreachable network or a temporary DNS failure. It
    does so for up to ``max_wait`` seconds in all, waits and attempts included;
    a Retry-After longer than the time left ends it at once, saying so. Any
    other error raises AutouiError at once: other statuses, a TLS or HTTP
    protocol error, an unknown host, a 200 answer that is not a prediction
    (``bad_answer``: not JSON, not an object, over 64 MiB). ``timeout`` bounds
    each socket operation of an attempt. The probes and ``metrics`` are not
    retried. Safe to share between threads (one connection per request).

    A malformed ``base_url`` (no http:// or https:// scheme, no host, a port
    outside 1-65535, a query or fragment) raises ValueError here.
    """

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8080",
        token: Optional[str] = None,
        timeout: float = 60,
        max_wait: float = 120,
    ):
        self.base_url, u = _base_url(base_url)
        self._scheme = u.scheme
        self._host = u.hostname
        self._port = u.port
        # As Go sends the path: escaped where it has to be (non-ASCII), as is otherwise.
        self._prefix = urllib.parse.quote(u.path.rstrip("/"), safe="/%!$&'()*+,;=:@")
        self.token = token.strip() if token else None
        self.timeout = timeout
        self.max_wait = max_wait
        #: backoff: first delay and cap (the Go client's MinBackoff, MaxBackoff)
        self.backoff_initial = 0.1
        self.backoff_max = 5.0
        #: number of retries the last call made (for logs and tests)
        self.last_retries = 0
        self._random = random.Random()

    # --- public API -----------------------------------------------------------------

    def predict(
        self,
        screen: Any = None,
        goal: str = "",
        history: Sequence[HistoryItem] = (),
        features: Any = None,
        max_new_tokens: Optional[int] = None,
        constrain: bool = False,
    ) -> Prediction:
        """The next action for ``goal`` on ``screen`` after ``history``.

        ``screen`` is PNG/JPEG bytes, a file path, a PIL image or an HxWx3/4
        uint8 numpy array; or give ``features`` (the bundle's image_dim floats)
        instead. ``history`` holds the previous actions, oldest first (Action,
        Prediction or action dicts).
        """
        if (screen is None) == (features is None):
            raise ValueError("give exactly one of screen and features")
        body: Dict[str, Any] = {"goal": goal}
        hist = _history_json(history)
        if screen is not None:
            body["screen"] = base64.b64encode(encode_screen(screen)).decode("ascii")
        else:
            body["features"] = _features_json(features)
        if hist:
            body["history"] = hist
        options: Dict[str, Any] = {}
        if max_new_tokens:
            options["max_new_tokens"] = int(max_new_tokens)
        if constrain:
            options["constrain"] = True
        if options:
            body["options"] = options
        # Non-finite numbers were refused above, with their field's name.
        return self._call("POST", "/v1/predict", json.dumps(body, allow_nan=False).encode("utf-8"), _prediction)

    def health(self) -> bool:
        """GET /healthz: whether the process answers (no retries)."""
        return self._probe("/healthz")

    def ready(self) -> bool:
        """GET /readyz: whether the model is loaded (no retries)."""
        return self._probe("/readyz")

    def wait_ready(self, timeout: Optional[float] = None, interval: float = 0.1) -> None:
        """Poll /readyz until it answers 200, or raise AutouiError (timeout)."""
        deadline = time.monotonic() + (self.max_wait if timeout is None else timeout)
        while not self.ready():
            if time.monotonic() >= deadline:
                raise AutouiError(None, "timeout", f"{self.base_url} not ready")
            time.sleep(interval)

    def metrics(self) -> str:
        """GET /metrics: the Prometheus text (no retries)."""
        try:
            status, headers, data = self._once("GET", "/metrics", None, self.timeout)
        except (OSError, http.client.HTTPException) as e:
            kind = "timeout" if isinstance(e, _TIMEOUTS) else "connection"
            raise AutouiError(None, kind, f"GET {self.base_url}/metrics: {_describe(e)}") from e
        if status != 200:
            raise self._error(status, headers, data)
        return data.decode("utf-8")

    # --- transport ------------------------------------------------------------------

    def _probe(self, path: str) -> bool:
        try:
            status, _, _ = self._once("GET", path, None, self.timeout)
        except (OSError, http.client.HTTPException):
            return False
        return status == 200

    def _headers(self, body: Optional[bytes]) -> Dict[str, str]:
        h = {"Accept": "application/json", "User-Agent": "autoui-client-python/0.1.0"}
        if body is not None:
            h["Content-Type"] = "application/json"
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        return h

    def _once(self, method: str, path: str, body: Optional[bytes], timeout: float) -> Tuple[int, Any, bytes]:
        cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
        conn = cls(self._host, self._port, timeout=timeout)
        try:
            try:
                conn.request(method, self._prefix + path, body=body, headers=self._headers(body))
            except (BrokenPipeError, ConnectionResetError):
                # The server may have answered (a 401, 413 or 429) and closed before
                # the body was all sent: its answer, when it came, is the one to read.
                try:
                    resp = conn.getresponse()
                except (OSError, http.client.HTTPException):
                    pass
                else:
                    return resp.status, resp.headers, _read(resp)
                raise
            resp = conn.getresponse()
            return resp.status, resp.headers, _read(resp)
        finally:
            conn.close()

    def _call(self, method: str, path: str, body: Optional[bytes], parse: Callable[[bytes], Any]) -> Any:
        """Send until an answer parses, as the Go client's PredictRaw: what
        ``_retryable`` says a retry may mend (timeouts, connections refused,
        reset or closed early) and RETRIED_STATUSES are sent again after
        ``_delay``, while that leaves the wait within ``max_wait``; each attempt
        ends by then too. Other statuses, other errors and a 200 answer that
        ``parse`` refuses raise at once."""
        where = f"{method} {self.base_url}{path}"
        deadline = time.monotonic() + self.max_wait
        attempt = 0
        self.last_retries = 0
        while True:
            left = deadline - time.monotonic()
            try:
                status, headers, data = self._once(method, path, body, max(min(self.timeout, left), 0.001))
            except (OSError, http.client.HTTPException) as e:
                timeout = isinstance(e, _TIMEOUTS)
                if timeout and left <= self.timeout:  # the attempt ran to the end of max_wait
                    msg = f"no answer within max_wait {self.max_wait}s ({_attempts(attempt + 1)})"
                    raise AutouiError(None, "timeout", f"{where}: {msg}") from e
                err = AutouiError(None, "timeout" if timeout else "connection", f"{where}: {_describe(e)}")
                if not _retryable(e):  # TLS, protocol, unknown host: a retry would fail again
                    raise err from e
                err.__cause__ = e
            else:
                if status == 200:
                    if len(data) > MAX_ANSWER:
                        msg = f"answer is over the {MAX_ANSWER >> 20} MiB limit: not a prediction"
                        raise AutouiError(200, "bad_answer", msg)
                    try:
                        return parse(data)
                    except (ValueError, TypeError, RecursionError) as e:
                        ctype = headers.get("Content-Type") or ""
                        msg = f"answer is not a prediction (Content-Type {ctype!r}): {_one_line(str(e))}"
                        raise AutouiError(200, "bad_answer", msg) from e
                err = self._error(status, headers, data)
                if status not in RETRIED_STATUSES:
                    raise err
            delay = self._delay(attempt, err.retry_after)
            left = deadline - time.monotonic()
            if delay > left:
                if err.retry_after is not None and err.retry_after > left:
                    msg = (
                        f"the server asked to retry after {_duration(err.retry_after)}, more than the "
                        f"{_duration(max(left, 0.0))} left of max_wait {self.max_wait}s: {err.message}"
                    )
                    raise AutouiError(err.status, err.kind, msg, err.retry_after)
                raise err
            time.sleep(delay)
            attempt += 1
            self.last_retries = attempt

    def _delay(self, attempt: int, retry_after: Optional[float]) -> float:
        """The wait before retry ``attempt + 1`` (the Go client's retryWait): the
        server's Retry-After plus a random share of the exponential backoff (full
        jitter); without one (or one of 0) the backoff jittered to [1/2, 1) of
        itself. Jitter keeps a farm of agents refused at once from retrying in step."""
        backoff = min(self.backoff_max, self.backoff_initial * (2**attempt))
        if retry_after is None or retry_after <= 0:
            return backoff * (0.5 + self._random.random() / 2)
        return retry_after + backoff * self._random.random()

    @staticmethod
    def _error(status: int, headers: Any, data: bytes) -> AutouiError:
        """An error answer: the server's kind and text from its JSON body, else
        the kind its status means and the body's text (one line either way)."""
        kind = _KIND_BY_STATUS.get(status, f"http_{status}")
        message: Any = data
        try:
            obj = json.loads(data)
        except (ValueError, RecursionError):
            obj = None
        if isinstance(obj, dict):
            if isinstance(obj.get("kind"), str) and obj["kind"]:
                kind = obj["kind"]
            if isinstance(obj.get("error"), str) and obj["error"]:
                message = obj["error"]
        message = _one_line(message) or http.client.responses.get(status, "")
        return AutouiError(status, kind, message, _retry_after(headers.get("Retry-After") if headers else None))

"""HTTP client for `autoui serve` (standard library only).

The wire format is the server's: POST /v1/predict takes
``{"goal", "screen" (base64 PNG/JPEG) | "features", "history", "options"}``
and answers the JSON of ``autoui predict --json`` plus ``serve`` (queue and
batch info). Errors are ``{"error": str, "kind": str}``.
"""

from __future__ import annotations

import base64
import http.client
import json
import random
import socket
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from .images import encode_screen

__all__ = [
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

#: The point of an action that has none.
NO_POINT: Tuple[float, float] = (-1.0, -1.0)

#: |lift - touch| (normalized, Euclidean) at or below which a DUAL_POINT is a tap
#: (Auto-UI's action matching rule).
TAP_DISTANCE = 0.04

Point = Tuple[float, float]


class AutouiError(Exception):
    """An error answer from the server, or no answer at all.

    ``status`` is the HTTP status (None when no response came: then ``kind`` is
    "connection" or "timeout"); ``kind`` is the server's stable word for the
    error (bad_request, unauthorized, not_found, too_large,
    unsupported_media_type, queue_full, not_ready, shutting_down, deadline,
    internal); ``message`` is the server's text.
    """

    def __init__(self, status: Optional[int], kind: str, message: str):
        super().__init__(f"autoui: {status if status is not None else '-'} {kind}: {message}")
        self.status = status
        self.kind = kind
        self.message = message


def _point(p: Any) -> Point:
    if p is None:
        return NO_POINT
    if isinstance(p, str):  # Auto-UI's own string form "[y, x]"
        p = json.loads(p)
    y, x = p
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
        if self.action_type not in ACTION_TYPES:
            raise ValueError(f"unknown action_type {self.action_type!r} (want one of {', '.join(ACTION_TYPES)})")
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
        """An action from its JSON object (missing points are (-1, -1))."""
        return cls(obj["action_type"], obj.get("touch_point"), obj.get("lift_point"), obj.get("typed_text") or "")

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


HistoryItem = Union[Action, Prediction, Dict[str, Any]]


def _history_json(history: Iterable[HistoryItem]) -> List[Dict[str, Any]]:
    out = []
    for item in history:
        if isinstance(item, Action):
            out.append(item.to_json())
        elif isinstance(item, Prediction):
            out.append(item.to_action().to_json())
        elif isinstance(item, dict):
            out.append(Action.from_json(item).to_json())
        else:
            raise TypeError(f"history item {item!r}: want an Action, a Prediction or a dict")
    return out


def _features_json(features: Any) -> List[float]:
    if hasattr(features, "tolist"):  # numpy array
        features = features.reshape(-1).tolist() if hasattr(features, "reshape") else features.tolist()
    return [float(v) for v in features]


def _retry_after(value: Optional[str]) -> Optional[float]:
    if value is None:
        return None
    try:
        return max(0.0, float(value.strip()))
    except ValueError:
        pass
    try:  # an HTTP date
        from email.utils import parsedate_to_datetime

        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


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

    ``predict`` retries with jittered exponential backoff (after the server's
    Retry-After) on connection errors, 429 queue_full and 503 not_ready/shutting_down, for
    up to ``max_wait`` seconds in all; any other error raises AutouiError at
    once. ``timeout`` bounds each HTTP exchange. Safe to share between threads
    (one connection per request).
    """

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8080",
        token: Optional[str] = None,
        timeout: float = 60,
        max_wait: float = 120,
    ):
        u = urllib.parse.urlsplit(base_url if "://" in base_url else "http://" + base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"base_url {base_url!r}: want http://HOST:PORT")
        self.base_url = base_url.rstrip("/")
        self._scheme = u.scheme
        self._host = u.hostname
        self._port = u.port
        self._prefix = u.path.rstrip("/")
        self.token = token.strip() if token else None
        self.timeout = timeout
        self.max_wait = max_wait
        #: backoff: first delay, cap, and the floor under a Retry-After of 0
        self.backoff_initial = 0.1
        self.backoff_max = 5.0
        self.retry_floor = 0.05
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
        if screen is not None:
            body["screen"] = base64.b64encode(encode_screen(screen)).decode("ascii")
        else:
            body["features"] = _features_json(features)
        hist = _history_json(history)
        if hist:
            body["history"] = hist
        options: Dict[str, Any] = {}
        if max_new_tokens:
            options["max_new_tokens"] = int(max_new_tokens)
        if constrain:
            options["constrain"] = True
        if options:
            body["options"] = options
        status, _, data = self._call("POST", "/v1/predict", json.dumps(body).encode("utf-8"))
        return Prediction.from_json(json.loads(data))

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
        """GET /metrics: the Prometheus text."""
        _, _, data = self._call("GET", "/metrics", None)
        return data.decode("utf-8")

    # --- transport ------------------------------------------------------------------

    def _probe(self, path: str) -> bool:
        try:
            status, _, _ = self._once("GET", path, None)
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

    def _once(self, method: str, path: str, body: Optional[bytes]) -> Tuple[int, Any, bytes]:
        cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
        conn = cls(self._host, self._port, timeout=self.timeout)
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
                    return resp.status, resp.headers, resp.read()
                raise
            resp = conn.getresponse()
            return resp.status, resp.headers, resp.read()
        finally:
            conn.close()

    def _call(self, method: str, path: str, body: Optional[bytes]) -> Tuple[int, Any, bytes]:
        start = time.monotonic()
        attempt = 0
        self.last_retries = 0
        while True:
            retry_after: Optional[float] = None
            try:
                status, headers, data = self._once(method, path, body)
            except socket.timeout as e:  # the server took too long: not retried
                raise AutouiError(None, "timeout", f"{method} {self.base_url}{path}: {e or 'timed out'}") from e
            except (OSError, http.client.HTTPException) as e:  # refused, reset, closed early
                err = AutouiError(None, "connection", f"{method} {self.base_url}{path}: {e}")
                err.__cause__ = e
            else:
                if 200 <= status < 300:
                    return status, headers, data
                err = self._error(status, data)
                if status not in (429, 503):
                    raise err
                retry_after = _retry_after(headers.get("Retry-After"))
            delay = self._delay(attempt, retry_after)
            if time.monotonic() - start + delay > self.max_wait:
                raise err
            time.sleep(delay)
            attempt += 1
            self.last_retries = attempt

    def _delay(self, attempt: int, retry_after: Optional[float]) -> float:
        """The wait before retry ``attempt + 1``: the server's Retry-After plus a
        random share of the exponential backoff (full jitter), or without one the
        backoff jittered to [1/2, 1] of itself; at most Retry-After + backoff_max.
        Jitter keeps a farm of agents refused at once from retrying in step."""
        backoff = min(self.backoff_max, self.backoff_initial * (2**attempt))
        if retry_after is None:
            return backoff * (0.5 + self._random.random() / 2)
        return max(retry_after, self.retry_floor) + backoff * self._random.random()

    @staticmethod
    def _error(status: int, data: bytes) -> AutouiError:
        kind = _KIND_BY_STATUS.get(status, f"http_{status}")
        message = data.decode("utf-8", "replace").strip()
        try:
            obj = json.loads(data)
            if isinstance(obj, dict):
                kind = obj.get("kind") or kind
                message = obj.get("error") or message
        except ValueError:
            pass
        return AutouiError(status, kind, message)

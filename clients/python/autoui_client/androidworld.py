"""Run Auto-UI on AndroidWorld through ``autoui serve``.

``AutoUIAgent`` follows android_world's agent interface
(``android_world/agents/base_agent.py``: ``EnvironmentInteractingAgent`` with
``step(goal) -> AgentInteractionResult(done, data)``, ``reset(go_home)``,
``transition_pause``, ``get_post_transition_state``) and acts through
``env.execute_action(JSONAction)`` (``android_world/env/json_action.py``).

When ``android_world`` is importable the agent subclasses its
``EnvironmentInteractingAgent`` and builds its ``JSONAction``s and
``AgentInteractionResult``s, so it plugs into android_world's runners
unchanged. Without it (this package does not depend on it) the module defines
minimal stand-ins with the same names, methods and signatures, so the agent
can drive anything that looks like an ``AsyncEnv`` (``get_state()`` returning
an object with ``.pixels``, ``execute_action(action)``, ``reset(go_home)``).
``HAVE_ANDROID_WORLD`` says which is in use.

Action mapping (Auto-UI -> android_world JSONAction), with points normalized
(y, x) and pixels from the screenshot's size (``State.pixels``, H x W):

=========================  ==============================================================
DUAL_POINT, tap            ``click`` at x = round(x * W), y = round(y * H) (clamped to the
(|lift - touch| <= 0.04)   screen); Auto-UI's tap rule is the distance threshold 0.04.
DUAL_POINT, swipe          ``scroll`` with ``direction`` the way the *view* moves through
                           the content, the opposite of the finger: finger up -> "down"
                           (what is below comes into view), finger down -> "up", finger
                           left -> "right", finger right -> "left" (the dominant axis of
                           lift - touch decides, vertical on a tie).
TYPE                       ``input_text`` with ``text`` only (no x/y: the field Auto-UI
                           tapped before typing already has focus).
PRESS_BACK                 ``navigate_back``
PRESS_HOME                 ``navigate_home``
PRESS_ENTER                ``keyboard_enter``
STATUS_TASK_COMPLETE       ``status`` with goal_status "complete"; not executed, done=True
STATUS_TASK_IMPOSSIBLE     ``status`` with goal_status "infeasible"; not executed, done=True
(output did not parse)     ``unknown``; not executed, not added to the history
=========================  ==============================================================

Why ``scroll`` and not ``swipe``: in android_world's actuation
(``android_world/env/actuation.py``, ``execute_adb_action``) ``scroll`` drags
from the screen's centre towards the edge *opposite* its direction ("down" drags
the finger from the centre to the top, so the content below comes into view),
while ``swipe`` ("the inverse of scroll") drags edge to edge *in* its direction,
starting on the very edge (a "down" swipe starts at y=0 and opens the
notification shade). Auto-UI's swipes are content scrolls started inside the
screen, so ``scroll`` with the content direction reproduces them.

Note: android_world's ``input_text`` types the text and then presses Enter
(``actuation.py``); a following Auto-UI PRESS_ENTER therefore presses it again.

Auto-UI has no action that answers in words, so android_world tasks judged on an
``answer`` JSONAction (information retrieval) cannot be completed by this agent.
"""

from __future__ import annotations

import abc
import dataclasses
import logging
import time
from typing import Any, Dict, List, Optional, Tuple

from .client import Action, Client, Prediction

__all__ = [
    "HAVE_ANDROID_WORLD",
    "AgentInteractionResult",
    "AutoUIAgent",
    "EnvironmentInteractingAgent",
    "JSONAction",
    "scroll_direction",
    "to_json_action",
]

try:  # the real interface, when android_world is installed
    from android_world.agents.base_agent import AgentInteractionResult, EnvironmentInteractingAgent
    from android_world.env.json_action import JSONAction

    HAVE_ANDROID_WORLD = True
except ImportError:  # minimal stand-ins with the same names and signatures
    HAVE_ANDROID_WORLD = False

    _ACTION_TYPES = (
        "click", "double_tap", "scroll", "swipe", "input_text", "navigate_home", "navigate_back",
        "keyboard_enter", "open_app", "status", "wait", "long_press", "answer", "unknown",
    )  # fmt: skip
    _DIRECTIONS = ("left", "right", "down", "up")

    @dataclasses.dataclass
    class JSONAction:  # type: ignore[no-redef]
        """Stand-in for android_world.env.json_action.JSONAction (same fields)."""

        action_type: Optional[str] = None
        index: Optional[int] = None
        x: Optional[int] = None
        y: Optional[int] = None
        text: Optional[str] = None
        direction: Optional[str] = None
        goal_status: Optional[str] = None
        app_name: Optional[str] = None
        keycode: Optional[str] = None
        clear_text: Optional[bool] = None

        def __post_init__(self) -> None:
            if self.action_type not in _ACTION_TYPES:
                raise ValueError(f"Invalid action type: {self.action_type}")
            if self.direction and self.direction not in _DIRECTIONS:
                raise ValueError(f"Invalid scroll direction: {self.direction}")

        def as_dict(self, skip_none: bool = True) -> Dict[str, Any]:
            return {k: v for k, v in dataclasses.asdict(self).items() if not (skip_none and v is None)}

        def json_str(self) -> str:
            import json

            return json.dumps(self.as_dict(), separators=(",", ":"))

    @dataclasses.dataclass
    class AgentInteractionResult:  # type: ignore[no-redef]
        """Stand-in for android_world.agents.base_agent.AgentInteractionResult."""

        done: bool
        data: Dict[str, Any]

    class EnvironmentInteractingAgent(abc.ABC):  # type: ignore[no-redef]
        """Stand-in for android_world.agents.base_agent.EnvironmentInteractingAgent."""

        def __init__(self, env: Any, name: str = "", transition_pause: Optional[float] = 1.0):
            if transition_pause is not None and transition_pause < 0:
                raise ValueError(f"transition_pause must be non-negative, got {transition_pause}")
            self._env = env
            self._name = name
            self._transition_pause = transition_pause
            self._max_steps: Optional[int] = None

        @property
        def transition_pause(self) -> Optional[float]:
            return self._transition_pause

        @transition_pause.setter
        def transition_pause(self, transition_pause: Optional[float]) -> None:
            self._transition_pause = transition_pause

        @property
        def env(self) -> Any:
            return self._env

        @env.setter
        def env(self, env: Any) -> None:
            self._env = env

        def set_max_steps(self, max_steps: int) -> None:
            self._max_steps = max_steps

        def reset(self, go_home: bool = False) -> None:
            self.env.reset(go_home=go_home)

        def get_post_transition_state(self) -> Any:
            """Sleeps transition_pause (None: asks the env to wait until stable), then get_state."""
            if self._transition_pause is None:
                return self.env.get_state(wait_to_stabilize=True)
            time.sleep(self._transition_pause)
            return self.env.get_state(wait_to_stabilize=False)

        @abc.abstractmethod
        def step(self, goal: str) -> AgentInteractionResult:
            """Performs one step of the agent on the environment."""

        @property
        def name(self) -> str:
            return self._name

        @name.setter
        def name(self, name: str) -> None:
            self._name = name


log = logging.getLogger(__name__)


def scroll_direction(action: Action) -> str:
    """android_world's scroll direction for an Auto-UI swipe: the way the view
    moves through the content, opposite to the finger (touch -> lift), on the
    dominant axis (vertical on a tie)."""
    dy = action.lift_point[0] - action.touch_point[0]
    dx = action.lift_point[1] - action.touch_point[1]
    if abs(dy) >= abs(dx):
        return "down" if dy < 0 else "up"
    return "right" if dx < 0 else "left"


def _pixel(v: float, size: int) -> int:
    return min(max(int(round(v * size)), 0), size - 1)


def to_json_action(action: Action, width: int, height: int) -> "JSONAction":
    """The android_world JSONAction for an Auto-UI action on a width x height
    screen (see the module's table)."""
    t = action.action_type
    if t == "DUAL_POINT":
        if action.is_tap():
            y, x = action.touch_point
            return JSONAction(action_type="click", x=_pixel(x, width), y=_pixel(y, height))
        return JSONAction(action_type="scroll", direction=scroll_direction(action))
    if t == "TYPE":
        return JSONAction(action_type="input_text", text=action.typed_text)
    if t == "PRESS_BACK":
        return JSONAction(action_type="navigate_back")
    if t == "PRESS_HOME":
        return JSONAction(action_type="navigate_home")
    if t == "PRESS_ENTER":
        return JSONAction(action_type="keyboard_enter")
    if t == "STATUS_TASK_COMPLETE":
        return JSONAction(action_type="status", goal_status="complete")
    if t == "STATUS_TASK_IMPOSSIBLE":
        return JSONAction(action_type="status", goal_status="infeasible")
    raise ValueError(f"unknown Auto-UI action_type {t!r}")


def _screen_size(pixels: Any) -> Tuple[int, int]:
    shape = getattr(pixels, "shape", None)
    if shape is not None:
        return int(shape[1]), int(shape[0])
    size = getattr(pixels, "size", None)  # a PIL image
    if isinstance(size, tuple):
        return int(size[0]), int(size[1])
    raise TypeError(f"screenshot of type {type(pixels).__name__}: want an HxWx3 array")


class AutoUIAgent(EnvironmentInteractingAgent):
    """Auto-UI as an android_world agent, predicting on an ``autoui serve``.

    Each ``step(goal)`` takes the screenshot (``State.pixels``, after the
    transition pause), asks ``client`` for the next action given the goal and
    the last ``max_history`` actions, maps it to a JSONAction, executes it
    (except status actions, which end the episode: done=True) and appends it
    to the history. ``reset`` clears the history.

    ``constrain`` decodes under the Auto-UI output grammar so that the output
    always parses; ``max_new_tokens`` overrides the model's token limit.
    """

    def __init__(
        self,
        env: Any,
        client: Client,
        name: str = "AutoUI",
        transition_pause: Optional[float] = 1.0,
        max_history: int = 8,
        constrain: bool = True,
        max_new_tokens: Optional[int] = None,
    ):
        super().__init__(env, name=name, transition_pause=transition_pause)
        self.client = client
        self.max_history = max_history
        self.constrain = constrain
        self.max_new_tokens = max_new_tokens
        self.history: List[Action] = []

    def reset(self, go_home: bool = False) -> None:
        super().reset(go_home)
        self.history = []

    def step(self, goal: str) -> "AgentInteractionResult":
        state = self.get_post_transition_state()
        pixels = state.pixels
        width, height = _screen_size(pixels)
        past = self.history[-self.max_history :] if self.max_history > 0 else []
        pred: Prediction = self.client.predict(
            screen=pixels, goal=goal, history=past, max_new_tokens=self.max_new_tokens, constrain=self.constrain
        )
        data: Dict[str, Any] = {
            "goal": goal,
            "raw": pred.raw,
            "prediction": pred,
            "action": None,
            "json_action": None,
            "screen_size": (width, height),
            "history_len": len(self.history),
        }
        if not pred.ok:
            log.warning("autoui: output did not parse (%s): %r", pred.error, pred.raw)
            data["json_action"] = JSONAction(action_type="unknown")
            data["summary"] = f"Auto-UI output did not parse: {pred.error}"
            return AgentInteractionResult(False, data)
        action = pred.to_action()
        ja = to_json_action(action, width, height)
        data["action"] = action
        data["json_action"] = ja
        self.history.append(action.clamped())  # as performed
        if ja.action_type == "status":
            data["summary"] = f"Auto-UI ended the task: {ja.goal_status}"
            return AgentInteractionResult(True, data)
        self.env.execute_action(ja)
        data["summary"] = f"executed {ja}"
        return AgentInteractionResult(False, data)

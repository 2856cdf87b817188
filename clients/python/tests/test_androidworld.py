"""The AndroidWorld adapter: the action mapping, and an agent on a fake AsyncEnv
against a real `autoui serve`."""

import dataclasses

import pytest

from autoui_client import Action, Client
from autoui_client.androidworld import (
    HAVE_ANDROID_WORLD,
    AgentInteractionResult,
    AutoUIAgent,
    EnvironmentInteractingAgent,
    JSONAction,
    scroll_direction,
    to_json_action,
)
from conftest import SCREENS

W, H = 1080, 2400

# JSONAction fields android_world's actuation reads, per action type.
_VALID = {
    "click": {"x", "y"},
    "scroll": {"direction"},
    "input_text": {"text"},
    "navigate_back": set(),
    "navigate_home": set(),
    "keyboard_enter": set(),
    "status": {"goal_status"},
}


def _fields(ja):
    return {k: v for k, v in dataclasses.asdict(ja).items() if v is not None}


@pytest.mark.parametrize(
    "action,want",
    [
        (Action.tap(0.405, 0.155), {"action_type": "click", "x": 167, "y": 972}),
        (Action.swipe(0.5, 0.5, 0.53, 0.5), {"action_type": "click", "x": 540, "y": 1200}),  # 0.03 apart: a tap
        (Action.tap(1.0, 1.0), {"action_type": "click", "x": W - 1, "y": H - 1}),  # clamped onto the screen
        (Action.tap(0.0, 0.0), {"action_type": "click", "x": 0, "y": 0}),
        # swipes: the view moves through the content opposite to the finger
        (Action.swipe(0.8, 0.5, 0.2, 0.5), {"action_type": "scroll", "direction": "down"}),  # finger up
        (Action.swipe(0.2, 0.5, 0.8, 0.5), {"action_type": "scroll", "direction": "up"}),  # finger down
        (Action.swipe(0.5, 0.8, 0.5, 0.2), {"action_type": "scroll", "direction": "right"}),  # finger left
        (Action.swipe(0.5, 0.2, 0.5, 0.8), {"action_type": "scroll", "direction": "left"}),  # finger right
        (Action.swipe(0.7, 0.4, 0.3, 0.5), {"action_type": "scroll", "direction": "down"}),  # mostly up
        (Action.swipe(0.5, 0.5, 0.53, 0.53), {"action_type": "scroll", "direction": "up"}),  # 0.042: a swipe; tie: vertical
        (Action.swipe(0.5, 0.5, 0.52, 0.45), {"action_type": "scroll", "direction": "right"}),  # mostly left
        (Action.type("paris hotels"), {"action_type": "input_text", "text": "paris hotels"}),
        (Action.type(""), {"action_type": "input_text", "text": ""}),
        (Action.back(), {"action_type": "navigate_back"}),
        (Action.home(), {"action_type": "navigate_home"}),
        (Action.enter(), {"action_type": "keyboard_enter"}),
        (Action.complete(), {"action_type": "status", "goal_status": "complete"}),
        (Action.impossible(), {"action_type": "status", "goal_status": "infeasible"}),
    ],
)
def test_mapping(action, want):
    ja = to_json_action(action, W, H)
    assert isinstance(ja, JSONAction)
    assert _fields(ja) == want
    assert set(want) - {"action_type"} == _VALID[ja.action_type]
    if ja.action_type == "click":
        assert isinstance(ja.x, int) and isinstance(ja.y, int)


def test_scroll_direction_is_opposite_the_finger():
    # android_world's scroll "down" drags the finger from the centre to the top (actuation.py)
    assert scroll_direction(Action.swipe(0.9, 0.5, 0.1, 0.5)) == "down"
    assert scroll_direction(Action.swipe(0.1, 0.5, 0.9, 0.5)) == "up"


def test_every_action_type_maps():
    from autoui_client import ACTION_TYPES

    actions = [Action(t) for t in ACTION_TYPES if t != "DUAL_POINT"] + [Action.tap(0.5, 0.5), Action.swipe(0.9, 0.5, 0.1, 0.5)]
    assert {to_json_action(a, W, H).action_type for a in actions} == set(_VALID)


def test_base_class():
    assert issubclass(AutoUIAgent, EnvironmentInteractingAgent)
    if not HAVE_ANDROID_WORLD:
        with pytest.raises(ValueError):
            JSONAction(action_type="fly")
        with pytest.raises(ValueError):
            JSONAction(action_type="scroll", direction="sideways")
        assert JSONAction(action_type="click", x=1, y=2).json_str() == '{"action_type":"click","x":1,"y":2}'


@dataclasses.dataclass(frozen=True)
class State:  # android_world.env.interface.State's fields
    pixels: object
    forest: object = None
    ui_elements: list = dataclasses.field(default_factory=list)


class FakeEnv:
    """An AsyncEnv stand-in: one fixed screenshot, records what it is asked to do."""

    def __init__(self, pixels):
        self.pixels = pixels
        self.executed = []
        self.resets = []
        self.states = 0

    def get_state(self, wait_to_stabilize=False):
        self.states += 1
        return State(pixels=self.pixels)

    def execute_action(self, action):
        self.executed.append(action)

    def reset(self, go_home=False):
        self.resets.append(go_home)
        return State(pixels=self.pixels)

    @property
    def logical_screen_size(self):
        return (self.pixels.shape[1], self.pixels.shape[0])


def test_agent_three_steps(server):
    np = pytest.importorskip("numpy")
    Image = pytest.importorskip("PIL.Image")
    pixels = np.asarray(Image.open(SCREENS / "home_1080x2400.png").convert("RGB"))
    assert pixels.shape == (2400, 1080, 3)
    env = FakeEnv(pixels)
    agent = AutoUIAgent(env, Client(server.url), transition_pause=0)
    assert agent.name == "AutoUI" and agent.transition_pause == 0
    agent.reset(go_home=True)
    assert env.resets == [True] and agent.history == []
    goal = "Open the settings app"
    prompts = []
    for i in range(3):
        res = agent.step(goal)
        prompts.append(res.data["prediction"].source_text)
        assert isinstance(res, AgentInteractionResult)
        d = res.data
        assert d["raw"] and d["prediction"].ok and d["prediction"].raw == d["raw"]
        assert len(agent.history) == i + 1 and agent.history[-1] == d["action"]
        assert d["history_len"] == i
        ja = d["json_action"]
        assert isinstance(ja, JSONAction)
        if res.done:  # a status action ends the episode unexecuted
            assert ja.action_type == "status" and len(env.executed) == i
            break
        assert not res.done and env.executed[-1] is ja and len(env.executed) == i + 1
        assert set(_fields(ja)) - {"action_type"} == _VALID[ja.action_type]
        if ja.action_type == "click":
            assert 0 <= ja.x < 1080 and 0 <= ja.y < 2400
    # the tiny model taps its settings icon (golden case00): (0.405, 0.155) of 1080x2400
    assert _fields(env.executed[0]) == {"action_type": "click", "x": 167, "y": 972}
    # the history went to the server: each step's prompt holds one more action
    assert len(set(prompts)) == len(prompts) and prompts[0].startswith("Previous Actions: Goal:")
    agent.reset()
    assert agent.history == [] and env.resets == [True, False]


def test_agent_history_is_capped(server):
    np = pytest.importorskip("numpy")
    Image = pytest.importorskip("PIL.Image")
    pixels = np.asarray(Image.open(SCREENS / "home_720x1280.png").convert("RGB"))
    seen = []

    class Spy(Client):
        def predict(self, **kw):
            seen.append(list(kw["history"]))
            return super().predict(**kw)

    agent = AutoUIAgent(FakeEnv(pixels), Spy(server.url), transition_pause=0, max_history=2)
    agent.history = [Action.back(), Action.home(), Action.enter()]
    agent.step("Open Chrome")
    assert seen == [[Action.home(), Action.enter()]]


def test_agent_unparsed_output_executes_nothing():
    class Canned:
        def predict(self, **kw):
            from autoui_client import Prediction

            return Prediction.from_json({"raw": "Action Plan: [DUAL", "error": "no action decision"})

    class Env(FakeEnv):
        pass

    class Px:
        shape = (100, 50, 3)

    env = Env(Px())
    agent = AutoUIAgent(env, Canned(), transition_pause=0)
    res = agent.step("x")
    assert not res.done and env.executed == [] and agent.history == []
    assert res.data["json_action"].action_type == "unknown"


def test_agent_status_ends_the_episode():
    from autoui_client import Prediction

    class Canned:
        def predict(self, **kw):
            return Prediction.from_json(dict(Action.impossible().to_json(), raw="r"))

    class Px:
        shape = (100, 50, 3)

    env = FakeEnv(Px())
    res = AutoUIAgent(env, Canned(), transition_pause=0).step("teleport")
    assert res.done and env.executed == []
    assert _fields(res.data["json_action"]) == {"action_type": "status", "goal_status": "infeasible"}


def test_agent_history_takes_a_point_off_the_screen_clamped():
    # an unconstrained model may say 1.5: the click lands on the edge, and the
    # history (which the server checks to lie in [0, 1]) holds it as performed
    from autoui_client import Prediction

    off = Action("DUAL_POINT", (1.5, -0.25), (1.5, -0.25))

    class Canned:
        def predict(self, **kw):
            return Prediction.from_json(dict(off.to_json(), raw="r"))

    class Px:
        shape = (100, 50, 3)

    env = FakeEnv(Px())
    agent = AutoUIAgent(env, Canned(), transition_pause=0)
    agent.step("tap the edge")
    assert agent.history == [Action("DUAL_POINT", (1.0, 0.0), (1.0, 0.0))]
    assert _fields(env.executed[0])["y"] == 99 and _fields(env.executed[0])["x"] == 0
    assert Action("PRESS_BACK").clamped() == Action("PRESS_BACK")

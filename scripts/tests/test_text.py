"""The reference prompt and target text, as Auto-UI's utils_data.py builds them."""

import pytest

from scripts import autoui_model as am


def test_first_step_prompt():
    assert am.source_text("Open the settings app", []) == "Previous Actions: Goal: Open the settings app"
    assert am.source_text("Open  the\n settings", [], window=0) == "Goal: Open the settings"


def test_history_window_keeps_last_8():
    hist = [am.Action("TYPE", typed_text=f"t{i}") for i in range(10)]
    s = am.source_text("g", hist)
    assert '"typed_text": "t1"' not in s and '"typed_text": "t2"' in s and '"typed_text": "t9"' in s
    assert s.startswith('Previous Actions: "action_type": "TYPE", "touch_point": "[-1.0, -1.0]"')
    assert s.endswith('"typed_text": "t9" Goal: g')


def test_action_text_and_target():
    tap = am.normalize_action(am.Action("DUAL_POINT", (0.72621, 0.418699), (0.7262, 0.4187)))
    assert am.action_text(tap) == ('"action_type": "DUAL_POINT", "touch_point": "[0.7262, 0.4187]", '
                                   '"lift_point": "[0.7262, 0.4187]", "typed_text": ""')
    t = am.target_text(["DUAL_POINT", "TYPE", "PRESS_ENTER", "STATUS_TASK_COMPLETE", "PRESS_BACK"], tap)
    assert t.startswith("Action Plan: [DUAL_POINT,TYPE,PRESS_ENTER,STATUS_TASK_COMPLETE] ; Action Decision: ")
    plan, parsed = am.parse_action_output(t)
    assert plan == ["DUAL_POINT", "TYPE", "PRESS_ENTER", "STATUS_TASK_COMPLETE"]
    assert parsed.touch_point == (0.7262, 0.4187)


def test_typed_text_cleaning():
    a = am.Action("TYPE", typed_text='it\'s "x" C:\\dir')
    assert am.action_text(a).endswith('"typed_text": "its x C:dir"')


@pytest.mark.parametrize("touch,lift,fixed,legacy", [
    ((0.9, 0.5), (0.1, 0.52), ((0.8, 0.5), (0.2, 0.5)), ((0.8, 0.5), (0.2, 0.5))),   # up
    ((0.1, 0.5), (0.9, 0.5), ((0.2, 0.5), (0.8, 0.5)), ((0.2, 0.5), (0.8, 0.5))),    # down
    ((0.5, 0.9), (0.5, 0.1), ((0.5, 0.8), (0.5, 0.2)), ((0.8, 0.5), (0.2, 0.5))),    # left
    ((0.5, 0.1), (0.5, 0.9), ((0.5, 0.2), (0.5, 0.8)), ((0.2, 0.5), (0.8, 0.5))),    # right
])
def test_swipe_maps(touch, lift, fixed, legacy):
    a = am.Action("DUAL_POINT", touch, lift)
    f = am.normalize_action(a, "fixed")
    g = am.normalize_action(a, "legacy")
    assert (tuple(f.touch_point), tuple(f.lift_point)) == fixed
    assert (tuple(g.touch_point), tuple(g.lift_point)) == legacy


def test_non_gesture_points():
    a = am.normalize_action(am.Action("PRESS_BACK", (0.3, 0.3), (0.3, 0.3)))
    assert am.render_point(a.touch_point) == "[-1.0, -1.0]"


def test_truncation_keeps_eos(tokenizer):
    ids, truncated = am.encode_source(tokenizer, "word " * 800)
    assert truncated and len(ids) == 512 and ids[-1] == am.EOS_ID
    ids, truncated = am.encode_source(tokenizer, "Goal: x")
    assert not truncated and ids[-1] == am.EOS_ID

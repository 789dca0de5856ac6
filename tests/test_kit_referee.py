import pytest

from openadapt.kit import OversightReferee

PERMISSIONS = {"L1": {"assign", "reply"}, "L2": {"assign", "reply", "close", "escalate"}}


def test_rbac_allows_the_scope_and_flags_the_rest():
    referee = OversightReferee(PERMISSIONS, penalty=0.5)
    assert referee.authorise("L2", "close") and referee.authorise("L1", "assign")
    assert referee.clean
    assert not referee.authorise("L1", "close")
    assert not referee.authorise("guest", "reply")  # an unknown role may do nothing
    assert referee.flags == ["unauthorised:L1:close", "unauthorised:guest:reply"]
    assert not referee.allowed("L1", "escalate") and len(referee.flags) == 2  # `allowed` only asks
    assert referee.penalty == 0.5


def test_a_stall_spiral_is_flagged_at_the_limit():
    referee = OversightReferee(PERMISSIONS, spiral_limit=2)
    assert not referee.stall("T-1") and referee.clean
    assert referee.stall("T-2") and referee.flags == ["stall_spiral:T-2"]
    assert referee.stall("T-1") and len(referee.flags) == 2  # every further stall is flagged too
    referee.reset()
    assert referee.clean and referee.stalls == 0


def test_other_violations_are_flags():
    referee = OversightReferee(PERMISSIONS)
    referee.flag("phishing_reply:M-1")
    assert not referee.clean and referee.flags == ["phishing_reply:M-1"]
    with pytest.raises(ValueError):
        OversightReferee(PERMISSIONS, spiral_limit=0)

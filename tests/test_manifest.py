import pytest
import yaml

from openadapt.envpkg.loader import load, resolve
from openadapt.envpkg.manifest import parse_manifest
from openadapt.errors import ManifestError, UntrustedPackageError, UsageError


def _edit(root, mutate):
    path = root / "openenv.yaml"
    data = yaml.safe_load(path.read_text())
    mutate(data)
    path.write_text(yaml.safe_dump(data))


def test_seed_manifest_parses():
    ref = resolve("seed:incident_triage")
    section = ref.manifest.openadapt
    assert ref.trusted
    assert section.eci_tiers == [1, 2, 3, 4, 5]
    assert section.step_budget[5] < section.step_budget[1]
    assert section.reward_range == (-0.5, 1.0)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d["openadapt"].pop("environment"), "openadapt.environment"),
        (lambda d: d["openadapt"].update(eci_tiers=[1, 2, 7]), "openadapt.eci_tiers"),
        (lambda d: d["openadapt"]["step_budget"].pop(5), "step_budget has no entry for tiers [5]"),
        (lambda d: d["openadapt"].update(action="models.TriageAction"), "openadapt.action"),
        (lambda d: d["openadapt"].update(invalid_action_reward=-3), "invalid_action_reward"),
        (lambda d: d["openadapt"]["text_protocol"].update(observation_template="../x.j2"),
         "openadapt.text_protocol.observation_template"),
        (lambda d: d["openadapt"].update(colour="blue"), "openadapt.colour"),
        (lambda d: d.update(name="Incident Triage"), "field 'name'"),
        (lambda d: d.pop("openadapt"), "field 'openadapt' is missing"),
    ],
)
def test_bad_manifest_names_the_field(triage_copy, mutate, field):
    _edit(triage_copy, mutate)
    with pytest.raises(ManifestError) as info:
        parse_manifest(triage_copy)
    message = str(info.value)
    assert field in message
    assert "\n" not in message


def test_manifest_that_is_not_yaml(triage_copy):
    (triage_copy / "openenv.yaml").write_text("name: [unclosed\n")
    with pytest.raises(ManifestError, match="not valid YAML"):
        parse_manifest(triage_copy)


def test_path_without_manifest(tmp_path):
    with pytest.raises(ManifestError, match="has no openenv.yaml"):
        resolve(str(tmp_path))


def test_unknown_seed_lists_the_seeds():
    with pytest.raises(UsageError, match="unknown seed 'nope'; available seeds: .*incident_triage"):
        resolve("seed:nope")


def test_missing_path():
    with pytest.raises(UsageError, match="no such directory"):
        resolve("/definitely/not/here")


def test_copied_package_is_untrusted_until_opted_in(triage_copy):
    with pytest.raises(UntrustedPackageError, match="--trust"):
        load(str(triage_copy))
    pkg = load(str(triage_copy), trust=True)
    obs = pkg.make_env().reset(seed=1, eci=2)
    assert obs.eci == 2


def test_action_class_must_accept_an_empty_payload(triage_copy):
    models = triage_copy / "models.py"
    models.write_text(models.read_text().replace(
        'tool: Tool | None = Field(default=None, description="what to do")', 'tool: Tool = Field(description="x")'))
    with pytest.raises(ManifestError, match="must validate from an empty payload"):
        load(str(triage_copy), trust=True)


def test_manifest_naming_a_missing_module(triage_copy):
    _edit(triage_copy, lambda d: d["openadapt"].update(observation="nomodule:Obs"))
    with pytest.raises(ManifestError, match="cannot import module 'nomodule'"):
        load(str(triage_copy), trust=True)

import pytest
import yaml

from openadapt.envpkg.loader import load, resolve
from openadapt.envpkg.manifest import parse_manifest
from openadapt.errors import ManifestError, UntrustedPackageError, UsageError
from openadapt.families.domain import DomainError


def _edit(root, mutate, name="openenv.yaml"):
    path = root / name
    data = yaml.safe_load(path.read_text())
    mutate(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def test_seed_manifest_parses():
    ref = resolve("seed:incident_triage")
    section = ref.manifest.openadapt
    assert ref.seed and ref.trusted and ref.data_only
    assert section.format_version == 2 and section.family == "diagnosis@1" and section.domain == "domain.yaml"
    assert section.eci_tiers == [1, 2, 3, 4, 5]
    assert section.step_budget[5] < section.step_budget[1]
    assert section.reward_range == (-0.5, 1.0)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d["openadapt"].pop("family"), "name a mechanics family"),
        (lambda d: d["openadapt"].update(family="diagnosis"), "openadapt.family"),
        (lambda d: d["openadapt"].update(eci_tiers=[1, 2, 7]), "ECI tier 7 is outside 1-5"),
        (lambda d: d["openadapt"]["step_budget"].pop(5), "step_budget has no entry for tiers [5]"),
        (lambda d: d["openadapt"].update(invalid_action_reward=-3), "invalid_action_reward"),
        (lambda d: d["openadapt"].update(domain="../x.yaml"), "openadapt.domain"),
        (lambda d: d["openadapt"].update(colour="blue"), "openadapt.colour"),
        (lambda d: d.update(name="Incident Triage"), "field 'name'"),
        (lambda d: d.pop("openadapt"), "field 'openadapt' is missing"),
    ],
)
def test_bad_v2_manifest_names_the_field(triage_copy, mutate, field):
    _edit(triage_copy, mutate)
    with pytest.raises(ManifestError) as info:
        parse_manifest(triage_copy)
    message = str(info.value)
    assert field in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d["openadapt"].pop("environment"), "openadapt.mechanics.environment"),
        (lambda d: d["openadapt"].update(action="models.GuessAction"), "openadapt.mechanics.action"),
        (lambda d: d["openadapt"]["text_protocol"].update(observation_template="../x.j2"),
         "openadapt.mechanics.text_protocol.observation_template"),
    ],
)
def test_bad_v1_manifest_names_the_field(guess_copy, mutate, field):
    _edit(guess_copy, mutate)
    with pytest.raises(ManifestError, match="field") as info:
        parse_manifest(guess_copy)
    assert field in str(info.value)


def test_v1_manifest_still_loads_into_the_same_model(guess_copy):
    section = parse_manifest(guess_copy).openadapt
    assert section.format_version == 1 and section.family is None
    assert section.mechanics.environment == "server.guess_env_environment:GuessEnvironment"
    assert section.malformed_reward == -0.1  # read from v1's text_protocol


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


def test_copied_family_package_is_data_only_and_loads_without_trust(triage_copy):
    ref = resolve(str(triage_copy))
    assert not ref.seed and ref.trusted
    obs = load(ref).make_env().reset(seed=1, eci=2)
    assert obs.eci == 2


def test_unknown_family_is_a_clear_error(triage_copy):
    _edit(triage_copy, lambda d: d["openadapt"].update(family="telepathy@1"))
    with pytest.raises(UsageError, match="unknown family 'telepathy'; available families: .*diagnosis"):
        load(str(triage_copy))


def test_family_version_that_does_not_exist(triage_copy):
    _edit(triage_copy, lambda d: d["openadapt"].update(family="diagnosis@9"))
    with pytest.raises(UsageError, match="diagnosis@9 is not available"):
        load(str(triage_copy))


def test_broken_domain_names_the_field(triage_copy):
    _edit(triage_copy, lambda d: d["components"][0].update(depends_on=["no-such-service"]), name="domain.yaml")
    with pytest.raises(DomainError, match=r"domain\.components\[0\]\.depends_on\[0\]: 'no-such-service'"):
        load(str(triage_copy))


def test_mechanics_package_is_untrusted_until_opted_in(guess_copy):
    with pytest.raises(UntrustedPackageError, match="--trust"):
        load(str(guess_copy))
    pkg = load(str(guess_copy), trust=True)
    obs = pkg.make_env().reset(seed=1, eci=2)
    assert obs.eci == 2


def test_action_class_must_accept_an_empty_payload(guess_copy):
    models = guess_copy / "models.py"
    models.write_text(models.read_text().replace(
        'guess: int | None = Field(default=None, ge=0, le=99, description="your guess")',
        'guess: int = Field(ge=0, le=99, description="your guess")'))
    with pytest.raises(ManifestError, match="must validate from an empty payload"):
        load(str(guess_copy), trust=True)


def test_manifest_naming_a_missing_module(guess_copy):
    _edit(guess_copy, lambda d: d["openadapt"].update(observation="nomodule:Obs"))
    with pytest.raises(ManifestError, match="cannot import module 'nomodule'"):
        load(str(guess_copy), trust=True)

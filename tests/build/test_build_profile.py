"""Build profiles: shipped data, validation, config overrides and the build environment."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ds4sync.core.errors import ConfigError
from ds4sync.models.config import load_config, shipped_profile
from ds4sync.models.native_profile import (
    BuildConfig,
    BuildProfile,
    BuildStep,
    compose_build_env,
    load_profiles,
    select_profile,
)


def test_shipped_profiles_name_the_targets() -> None:
    profiles = load_profiles(shipped_profile())
    sm120, sm90 = profiles["sm120"], profiles["sm90"]
    assert sm120.env["TORCH_CUDA_ARCH_LIST"] == "12.0"
    assert sm120.env["CMAKE_ARGS"] == "-DCMAKE_CUDA_ARCHITECTURES=120"
    assert sm90.env["TORCH_CUDA_ARCH_LIST"] == "9.0"
    for profile in (sm120, sm90):
        assert {"nvcc", "cmake", "ninja"} <= set(profile.requires)
        assert profile.requires_torch_cuda
        assert profile.install_args == ("-e", ".", "--no-build-isolation", "--no-deps", "-v")
        assert [s.when_exists for s in profile.pre_steps] == ["use_existing_torch.py", "requirements/build/cuda.txt"]


@pytest.mark.parametrize(
    ("profile", "expected"),
    [
        ({"envv": {}}, "profiles.bad.envv: unknown key"),
        ({"requires": ["nvcc", "icc"]}, "unknown tool(s) icc"),
        ({"env": {"BAD NAME": "1"}}, "is not an environment variable name"),
        (
            {"pre_steps": [{"name": "both", "run": ["x"], "pip_install": ["y"]}]},
            "exactly one of 'run' or 'pip_install'",
        ),
        ({"pre_steps": [{"name": "neither"}]}, "exactly one of 'run' or 'pip_install'"),
        ({"venv": {"tool": "conda"}}, "profiles.bad.venv.tool"),
    ],
)
def test_bad_profiles_name_file_and_key(tmp_path: Path, profile: dict, expected: str) -> None:
    folder = tmp_path / "profile"
    (folder / "kernels").mkdir(parents=True)
    (folder / "kernels" / "build_profiles.yaml").write_text(yaml.safe_dump({"profiles": {"bad": profile}}))
    with pytest.raises(ConfigError) as caught:
        load_profiles(folder)
    line = caught.value.one_line()
    assert "build_profiles.yaml" in line
    assert expected in line


def test_config_section_adds_and_replaces_profiles(tmp_path: Path) -> None:
    (tmp_path / "ds4sync.yaml").write_text(
        yaml.safe_dump(
            {
                "build": {
                    "profile": "sm90",
                    "profiles": {
                        "sm90": {"env": {"TORCH_CUDA_ARCH_LIST": "9.0a"}, "requires": ["nvcc"]},
                        "cpu": {"requires": ["g++"], "requires_torch": False},
                    },
                }
            }
        )
    )
    config = load_config(tmp_path / "ds4sync.yaml")
    profiles = load_profiles(shipped_profile(), config.build)
    assert config.build.profile == "sm90"
    assert profiles["sm90"].env == {"TORCH_CUDA_ARCH_LIST": "9.0a"}
    assert profiles["sm120"].env["TORCH_CUDA_ARCH_LIST"] == "12.0"
    assert select_profile(profiles, "cpu").requires == ("g++",)


def test_config_rejects_unknown_build_key(tmp_path: Path) -> None:
    (tmp_path / "ds4sync.yaml").write_text("build:\n  profil: sm90\n")
    with pytest.raises(ConfigError, match=r"build\.profil: unknown key"):
        load_config(tmp_path / "ds4sync.yaml")


def test_unknown_profile_lists_known_ones() -> None:
    with pytest.raises(
        ConfigError, match=r"no build profile named 'sm100' \(known: cpu-overlay, sm120, sm90, sm90-moe\)"
    ):
        select_profile(load_profiles(shipped_profile(), BuildConfig()), "sm100")


def test_profile_env_wins_and_secrets_stay_out(tmp_path: Path) -> None:
    base = {
        "PATH": "/usr/bin",
        "MAX_JOBS": "64",
        "CUDA_HOME": "/opt/cuda-old",
        "HOME": "/home/x",
        "GITHUB_TOKEN": "ghp_processsecret",
        "HF_TOKEN": "hf_processsecret",
        "AWS_SECRET_ACCESS_KEY": "aws1",
        "GH_TOKEN": "gho_kept_value",
    }
    profile = BuildProfile(
        env={"MAX_JOBS": "{cpus}", "CUDA_HOME": "/usr/local/cuda-13", "PY": "{python}", "HF_TOKEN": "hf_profilesecret"},
        keep_env=("GH_TOKEN",),
    )
    venv = tmp_path / "venv"
    env, recorded = compose_build_env(profile, base=base, venv=venv, values={"python": "/x/bin/python"})
    assert env["CUDA_HOME"] == "/usr/local/cuda-13"
    assert env["MAX_JOBS"].isdigit() and env["MAX_JOBS"] != "64"
    assert env["PY"] == "/x/bin/python"
    assert env["PATH"].split(":")[0] == str(venv / "bin")
    assert env["VIRTUAL_ENV"] == str(venv)
    assert env["HOME"] == "/home/x"
    assert "GITHUB_TOKEN" not in env and "AWS_SECRET_ACCESS_KEY" not in env
    assert env["GH_TOKEN"] == "gho_kept_value"
    assert env["HF_TOKEN"] == "hf_profilesecret"
    assert recorded["HF_TOKEN"] == "[redacted]"
    assert "processsecret" not in str(recorded) and "hf_profilesecret" not in str(recorded)
    assert recorded["CUDA_HOME"] == "/usr/local/cuda-13"


def test_step_model_is_frozen() -> None:
    step = BuildStep(name="x", run=("true",))
    with pytest.raises(ValueError):
        step.name = "y"  # type: ignore[misc]

import pytest

from crnn.config import ConfigError, load_config, save_config


def test_defaults_and_typed_overrides():
    cfg = load_config(
        None,
        [
            "train.lr=3e-4",
            "data.case_fold=true",
            "model.channels=[1,2,3,4,5,6,7]",
            "train.max_steps=10",
        ],
    )
    assert cfg.train.lr == pytest.approx(3e-4) and isinstance(cfg.train.lr, float)
    assert cfg.data.case_fold is True
    assert cfg.model.channels == [1, 2, 3, 4, 5, 6, 7]
    assert cfg.train.max_steps == 10


@pytest.mark.parametrize(
    "override, message",
    [
        ("train.lrr=1", "did you mean train.lr"),
        ("trian.lr=1", "unknown config key 'trian'"),
        ("train.lr=abc", "expected float"),
        ("train.max_steps=1.5", "expected int"),
        ("data.case_fold=3", "expected bool or null"),
        ("train.amp=fp8", "choose one of"),
        ("model.channels=[1,2]", "7 conv widths"),
        ("train.lr", "section.key=value"),
    ],
)
def test_bad_overrides_are_rejected(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override])


def test_yaml_file_merges_over_defaults_and_round_trips(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("train:\n  lr: 5e-4\n  max_steps: 7\ndata:\n  charset: alnum62\n")
    cfg = load_config(f, ["train.max_steps=9"])
    assert cfg.train.lr == pytest.approx(5e-4)
    assert cfg.train.max_steps == 9  # overrides win over the file
    assert cfg.data.charset == "alnum62"
    assert cfg.train.batch_size == 64  # untouched default
    save_config(cfg, tmp_path / "out.yaml")
    assert load_config(tmp_path / "out.yaml") == cfg


def test_missing_or_bad_file(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.yaml")
    f = tmp_path / "bad.yaml"
    f.write_text("train: [1, 2\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config(f)


def test_shipped_configs_load_and_every_config_the_docs_name_exists():
    import re
    from pathlib import Path

    root = Path(__file__).parents[1]
    shipped = sorted((root / "configs").glob("*.yaml"))
    assert {"quickstart.yaml", "crnn_en.yaml", "crnn_en_cpu.yaml"} <= {f.name for f in shipped}
    for f in shipped:
        load_config(f)
    docs = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    named = {m for d in docs for m in re.findall(r"configs/[\w.-]+\.yaml", d.read_text())}
    named = {n for n in named if len(Path(n).stem) > 1}  # configs/X.yaml is a placeholder
    assert named, "the README shows how to train with a config"
    missing = sorted(n for n in named if not (root / n).is_file())
    assert not missing, f"docs name configs that do not exist: {missing}"


def test_dataparallel_with_torch_compile_is_refused_with_the_way_out():
    with pytest.raises(ConfigError, match="compile=true does not work with dist.strategy=dp.*ddp"):
        load_config(None, ["dist.strategy=dp", "train.compile=true"])
    load_config(None, ["dist.strategy=ddp", "train.compile=true"])
    load_config(None, ["dist.strategy=dp", "train.compile=false"])


def test_a_bundled_recipe_is_found_by_name_from_anywhere(tmp_path, monkeypatch):
    """A pip-installed user has no configs/ folder: `--config crnn_zh_cpu` (or the README's
    `configs/crnn_zh_cpu.yaml`) finds the recipe shipped inside the package."""
    monkeypatch.chdir(tmp_path)
    assert load_config("crnn_zh_cpu").data.charset == "zh5529"
    assert load_config("configs/quickstart.yaml").train.output_dir == "runs/quickstart"
    with pytest.raises(ConfigError, match="bundled recipes by name .*quickstart"):
        load_config("no_such_recipe")
    mine = tmp_path / "quickstart.yaml"  # a file of your own wins over a bundled name
    mine.write_text("train:\n  max_steps: 7\n", encoding="utf-8")
    assert load_config("quickstart.yaml").train.max_steps == 7

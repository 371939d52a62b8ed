import numpy as np
import pytest
import torch
from conftest import write_folder

from crnn.config.image_spec import ImageSpec
from crnn.data.batching import BucketBatchSampler, EvalBatchSampler, MixedBatchSampler, collate
from crnn.data.datasets import FolderSource, RecognitionDataset, ctc_steps_needed, open_sources
from crnn.model import CRNN
from crnn.text.alphabet import Charset, UnknownCharacterError

T = CRNN(37).output_length
ALNUM = Charset.from_spec("alnum36")


def test_filtering_counts_every_reason(tmp_path):
    labels = ["good", "ba-d", "   ", "x" * 40, "aaaaaaaaaaaaaaaaa", "Fine"]
    root = write_folder(tmp_path / "d", labels)
    spec = ImageSpec(max_width=64)  # 17 frames: 40 chars don't fit, 17 repeated 'a' need 33
    ds = RecognitionDataset(open_sources([root]), ALNUM, spec, T)
    assert [ds.label(i) for i in range(len(ds))] == ["good", "fine"]
    assert ds.skipped == {"unknown_chars": 1, "empty": 1, "too_long": 2}
    assert any("ba-d" in e for e in ds.skip_examples["unknown_chars"])


def test_unknown_characters_can_be_an_error(tmp_path):
    root = write_folder(tmp_path / "d", ["ok", "no!"])
    with pytest.raises(UnknownCharacterError, match="'!'"):
        RecognitionDataset(open_sources([root]), ALNUM, ImageSpec(), T, unknown_chars="error")


def test_evaluation_keeps_what_training_skips(tmp_path):
    root = write_folder(tmp_path / "d", ["ok", "no!", "   "])
    ds = RecognitionDataset(open_sources([root]), ALNUM, ImageSpec(), T, evaluation=True)
    assert [ds[i]["label"] for i in range(len(ds))] == ["ok", "no!"]
    assert ds[1]["raw_label"] == "no!" and ds.skipped == {"empty": 1}


def test_images_are_widened_so_the_label_fits(tmp_path):
    from PIL import Image

    root = write_folder(tmp_path / "d", ["abababababab"])
    Image.new("L", (20, 32), 255).save(root / "images" / "0000.png")  # far too narrow
    ds = RecognitionDataset(open_sources([root]), ALNUM, ImageSpec(), T)
    item = ds[0]
    assert item["image"].shape[-1] > 20
    assert T(item["image"].shape[-1]) >= ctc_steps_needed(item["target"])


def test_folder_source_reports_bad_lines(tmp_path):
    root = write_folder(tmp_path / "d", ["one", "two"])
    with open(root / "gt.txt", "a") as f:
        f.write("images/missing.png\tthree\nimages/0000.png\n")
    src = FolderSource(root)
    assert len(src) == 2
    assert [n for n, _ in src.bad_lines] == [3, 4]
    assert "not found" in src.bad_lines[0][1] and "no label" in src.bad_lines[1][1]


def test_unreadable_image_becomes_a_counted_error(tmp_path):
    root = write_folder(tmp_path / "d", ["one", "two"])
    (root / "images" / "0001.png").write_bytes(b"garbage")
    ds = RecognitionDataset(open_sources([root]), ALNUM, ImageSpec(), T)
    batch = collate([ds[0], ds[1]])
    assert (
        batch["labels"] == ["one"]
        and len(batch["errors"]) == 1
        and "0001.png" in batch["errors"][0]
    )


def test_collate_pads_targets_2d_for_dim0_scatter():
    items = [
        {
            "image": torch.zeros(1, 32, 12, dtype=torch.uint8),
            "target": [1, 2, 3],
            "label": "abc",
            "raw_label": "abc",
        },
        {
            "image": torch.zeros(1, 32, 20, dtype=torch.uint8),
            "target": [4],
            "label": "d",
            "raw_label": "d",
        },
    ]
    b = collate(items)
    assert b["images"].shape == (2, 1, 32, 20)
    assert b["widths"].tolist() == [12, 20]
    assert b["targets"].tolist() == [[1, 2, 3], [4, 0, 0]]
    assert b["target_lengths"].tolist() == [3, 1]


def _all_indices(sampler):
    return [i for batch in sampler for i, _ in batch]


@pytest.mark.parametrize("bucketing", [True, False])
def test_bucket_sampler_loses_nothing_and_splits_ranks_disjointly(bucketing):
    n, bs = 103, 8
    widths = np.random.default_rng(0).integers(16, 128, n)
    kw = {"widths": widths if bucketing else None, "seed": 3}
    single = _all_indices(BucketBatchSampler(n, bs, **kw))
    assert len(single) == (n // bs) * bs and len(set(single)) == len(single)
    ranks = [_all_indices(BucketBatchSampler(n, bs, world_size=2, rank=r, **kw)) for r in (0, 1)]
    assert not set(ranks[0]) & set(ranks[1])
    assert sorted(ranks[0] + ranks[1]) == sorted(single)
    assert len(ranks[0]) == len(ranks[1])


def test_bucket_sampler_groups_similar_widths():
    n, bs = 800, 16
    widths = np.random.default_rng(1).integers(16, 400, n)
    s = BucketBatchSampler(n, bs, widths=widths, seed=0)
    pad_bucketed = np.mean(
        [widths[[i for i, _ in b]].max() - widths[[i for i, _ in b]].mean() for b in s]
    )
    s2 = BucketBatchSampler(n, bs, widths=None, seed=0)
    pad_random = np.mean(
        [widths[[i for i, _ in b]].max() - widths[[i for i, _ in b]].mean() for b in s2]
    )
    assert pad_bucketed < pad_random / 5


def test_new_order_each_epoch_and_exact_resume():
    s = BucketBatchSampler(64, 8, widths=np.arange(64), seed=1)
    e0 = list(s)
    s.set_epoch(1)
    e1 = list(s)
    assert [i for b in e0 for i, _ in b] != [i for b in e1 for i, _ in b]
    s.set_epoch(1, start_step=3)
    assert list(s) == e1[3:]
    assert len(s) == len(e1) - 3


def test_global_batch_is_the_same_for_any_world_size_and_accumulation():
    n, bs = 96, 16
    widths = np.random.default_rng(2).integers(16, 128, n)
    ref = BucketBatchSampler(n, bs, widths=widths, seed=5).global_batches()
    for world, accum in ((2, 1), (1, 4), (2, 2)):
        parts = [
            list(
                BucketBatchSampler(
                    n, bs, widths=widths, seed=5, world_size=world, rank=r, accum_steps=accum
                )
            )
            for r in range(world)
        ]
        for step, gb in enumerate(ref):
            got = sorted(
                i
                for r in range(world)
                for mb in parts[r][step * accum : (step + 1) * accum]
                for i, _ in mb
            )
            assert got == sorted(gb.tolist())


def test_batch_size_must_split_evenly():
    with pytest.raises(ValueError, match="divisible by world_size x accum_steps = 2 x 3"):
        BucketBatchSampler(100, 8, world_size=2, accum_steps=3)


def test_endless_sampler_is_disjoint_across_ranks_and_resumable():
    r0 = MixedBatchSampler([None], [1.0], 8, world_size=2, rank=0)
    r1 = MixedBatchSampler([None], [1.0], 8, world_size=2, rank=1)
    it0, it1 = iter(r0), iter(r1)
    a = [i for _ in range(3) for _, i, _ in next(it0)]
    b = [i for _ in range(3) for _, i, _ in next(it1)]
    assert not set(a) & set(b) and sorted(a + b) == list(range(24))
    r0.set_epoch(0, start_step=2)
    assert [i for _, i, _ in next(iter(r0))] == a[8:12]


def test_eval_sampler_covers_every_sample_once_across_ranks():
    widths = np.random.default_rng(3).integers(16, 128, 37)
    parts = [list(EvalBatchSampler(37, 5, widths=widths, world_size=2, rank=r)) for r in (0, 1)]
    flat = [i for p in parts for b in p for i in b]
    assert sorted(flat) == list(range(37))


def test_split_counts_is_exact_and_proportional():
    from crnn.data.batching import split_counts

    assert split_counts([0.7, 0.3], 64) == [45, 19]
    assert sum(split_counts([1, 1, 1], 64)) == 64
    assert split_counts([2, 1, 1], 8) == [4, 2, 2]


def test_mixed_sampler_ratios_coverage_ranks_and_resume():
    from crnn.data.batching import MixedBatchSampler

    kw = {"seed": 4}
    s = MixedBatchSampler([None, 10], [0.75, 0.25], 16, **kw)
    it = iter(s)
    batches = [next(it) for _ in range(10)]
    for b in batches:
        assert sum(p == 0 for p, _, _ in b) == 12 and sum(p == 1 for p, _, _ in b) == 4
    finite = [i for b in batches for p, i, _ in b if p == 1]
    # 40 draws from a part of 10 samples: four shuffled epochs, each sample 4 times
    assert sorted(finite) == sorted(list(range(10)) * 4)
    assert finite[:10] != finite[10:20]
    synth = [i for b in batches for p, i, _ in b if p == 0]
    assert sorted(synth) == list(range(120))  # the endless part never repeats
    ranks = [
        MixedBatchSampler([None, 10], [0.75, 0.25], 16, world_size=2, rank=r, **kw) for r in (0, 1)
    ]
    r0, r1 = (iter(r) for r in ranks)
    for step in range(5):
        a, b = next(r0), next(r1)
        assert sorted(a + b) == sorted(batches[step])
    s.set_epoch(0, start_step=7)
    assert next(iter(s)) == batches[7]


def test_config_requires_ratios_to_mix_synth_with_data():
    from crnn.config import ConfigError, load_config

    with pytest.raises(ConfigError, match="data.train_ratios"):
        load_config(None, ['data.train=["synth", "x"]'])
    with pytest.raises(ConfigError, match="one share per entry"):
        load_config(None, ['data.train=["synth", "x"]', "data.train_ratios=[1.0]"])


def test_mixed_sampler_buckets_by_width_and_keeps_the_mix_ranks_and_resume():
    from crnn.data.batching import MixedBatchSampler

    synth_w = np.random.default_rng(5).integers(16, 384, 10_000)
    real_w = np.random.default_rng(6).integers(16, 200, 30)
    hints = [lambda i: float(synth_w[i]), lambda i: float(real_w[i])]
    kw = {"seed": 2, "bucket_window": 10}
    s = MixedBatchSampler([None, 30], [0.75, 0.25], 16, width_hints=hints, **kw)
    plain = MixedBatchSampler([None, 30], [0.75, 0.25], 16, **kw)
    it, it_plain = iter(s), iter(plain)
    batches = [next(it) for _ in range(30)]
    unsorted = [next(it_plain) for _ in range(30)]

    def width(item):
        return synth_w[item[1]] if item[0] == 0 else real_w[item[1]]

    def padded(bs):  # pixels of the batches padded to their widest image
        return sum(max(width(x) for x in b) * len(b) for b in bs)

    def used(bs):
        return sum(width(x) for b in bs for x in b)

    # The same samples as without bucketing, window by window, in the same mix per batch.
    for w in range(3):
        win = slice(10 * w, 10 * w + 10)
        assert sorted(x for b in batches[win] for x in b) == sorted(
            x for b in unsorted[win] for x in b
        )
    for b in batches:
        assert sum(p == 0 for p, _, _ in b) == 12 and sum(p == 1 for p, _, _ in b) == 4
        assert [width(x) for x in b] == sorted(width(x) for x in b)
    assert padded(unsorted) / used(unsorted) > 1.5
    assert padded(batches) / used(batches) < 1.4
    # Batches are not in width order across the window (shuffled).
    maxima = [max(width(x) for x in b) for b in batches[:10]]
    assert maxima != sorted(maxima)
    # Ranks split each global batch; resuming mid-window is exact.
    ranks = [
        MixedBatchSampler(
            [None, 30], [0.75, 0.25], 16, width_hints=hints, world_size=2, rank=r, **kw
        )
        for r in (0, 1)
    ]
    r0, r1 = (iter(r) for r in ranks)
    for step in range(12):
        a, b = next(r0), next(r1)
        assert a + b == batches[step]
    s2 = MixedBatchSampler([None, 30], [0.75, 0.25], 16, width_hints=hints, **kw)
    s2.set_epoch(0, start_step=17)
    assert next(iter(s2)) == batches[17]


def test_drawn_windows_are_sorted_by_width_keep_each_batchs_mix_and_resume_exactly():
    """``width_sorted_windows``: a window's samples dealt out again by the widths they
    came out at (a few percent padding, from over half), each micro-batch keeping its
    count of each part, failed items still counted, and a resumed run (window drawn
    again, ``skip``) yields what the uninterrupted one did from there."""
    from crnn.data.batching import sort_by_width, width_sorted_windows

    rng = np.random.default_rng(3)

    def item(k):
        part = int(k % 4 == 0)  # a quarter from part 1
        if k == 7:
            return {"error": "x.png: unreadable", "part": part}
        w = int(rng.integers(16, 384))
        return {
            "image": torch.zeros(1, 32, w, dtype=torch.uint8),
            "target": [1],
            "label": "a",
            "raw_label": "a",
            "source": f"s#{k}",
            "part": part,
        }

    drawn = [[item(8 * b + i) for i in range(8)] for b in range(40)]  # 4 windows of 10

    def pad_share(bs):
        return 1 - sum(sum(x["image"].shape[-1] for x in b if "image" in x) for b in bs) / sum(
            max(x["image"].shape[-1] for x in b if "image" in x) * sum("image" in x for x in b)
            for b in bs
        )

    sorted_ = sort_by_width(drawn[:10], np.random.default_rng(0))
    key = lambda b: sorted(x.get("source", "err") for x in b)  # noqa: E731
    assert sorted(x for b in sorted_ for x in key(b)) == sorted(
        x for b in drawn[:10] for x in key(b)
    )
    mix = lambda bs: sorted(sum(x["part"] == 1 for x in b) for b in bs)  # noqa: E731
    assert mix(sorted_) == mix(drawn[:10]) and all(len(b) == 8 for b in sorted_)
    assert pad_share(drawn[:10]) > 0.4 and pad_share(sorted_) < 0.25
    full = list(width_sorted_windows(drawn, 10, 0, 0, seed=5))
    assert len(full) == 40 and sum(len(b["errors"]) for b in full) == 1
    resumed = list(width_sorted_windows(drawn[20:], 10, 2, 3, seed=5))
    assert [b["sources"] for b in resumed] == [b["sources"] for b in full[23:]]
    # The order of a window's batches is shuffled, not by width.
    maxima = [int(b["widths"].max()) for b in full[:10]]
    assert maxima != sorted(maxima)


def test_synth_width_hint_is_the_rendered_label():
    from crnn.config import SynthConfig
    from crnn.data.datasets import SynthDataset
    from crnn.data.synth import SynthGenerator

    cs = Charset.from_spec("alnum36")
    cfg = SynthConfig(min_length=1, max_length=12)
    gen = SynthGenerator(cs, cfg, seed=3, height=32)
    ds = SynthDataset(gen, cs, ImageSpec(height=32), lambda w: w // 4)
    for i in range(20):
        img, label = gen.render(i)
        assert gen.label(i) == label
        assert ds.width_hint(i) == pytest.approx(32 * 0.55 * len(label))

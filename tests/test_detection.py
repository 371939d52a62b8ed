"""The detector's NumPy side: label files, geometry, targets, post-processing, metrics,
reading order and the line cut."""

from __future__ import annotations

import io
import json

import cv2
import numpy as np
import pytest

from crnn.data.errors import DataError
from crnn.data.quads import (
    check_box,
    count_problems,
    find_labelled,
    order_corners,
    parse_icdar_line,
    read_icdar,
    read_paddle_label,
    split_by_image,
)
from crnn.detect.geometry import offset_polygon, polygon_area, shrink_distance
from crnn.detect.metrics import DetCounts, match_image
from crnn.detect.order import cut_line, reading_order
from crnn.detect.postprocess import Detection, boxes_from_map
from crnn.detect.targets import make_targets


def quad(x0, y0, x1, y1):
    return np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], np.float32)


# ---- label files ----------------------------------------------------------------------


def test_icdar_line_keeps_commas_inside_the_text():
    numbers, text = parse_icdar_line("1,2,3,4,5,6,7,8,价格:1,299元,包邮")
    assert numbers == [1, 2, 3, 4, 5, 6, 7, 8]
    assert text == "价格:1,299元,包邮"


def test_corners_in_any_order_come_back_clockwise_from_the_top_left():
    # MTWI's usual order (top-left, bottom-left, bottom-right, top-right) and a crossed one.
    for corners in (
        [[10, 10], [10, 30], [90, 30], [90, 10]],
        [[90, 30], [10, 10], [90, 10], [10, 30]],
    ):
        q = order_corners(np.array(corners, float))
        assert q.tolist() == [[10, 10], [90, 10], [90, 30], [10, 30]]


def test_bad_boxes_are_named_and_counted(tmp_path):
    from PIL import Image

    Image.new("RGB", (100, 50)).save(tmp_path / "a.png")
    (tmp_path / "a.txt").write_text(
        "\ufeff10,10,60,10,60,30,10,30,好\r\n"  # BOM and CRLF: fine
        "0,0,0,0,0,0,0,0,点\n"  # one point
        "200,200,300,200,300,240,200,240,外\n"  # outside the 100x50 image
        "80,10,120,10,120,30,80,30,切\n"  # reaches outside: clipped
        "1,2,3,oops\n"  # not numbers
        "5,5,20,5,20,15,5,15,###\n",  # don't care: kept, flagged
        encoding="utf-8",
    )
    item = read_icdar(tmp_path / "a.txt", tmp_path / "a.png")
    assert item.texts == ["好", "切", "###"]
    assert item.ignore.tolist() == [False, False, True]
    assert dict(item.problems) == {2: "degenerate", 3: "outside", 4: "clipped", 5: "unparsable"}
    assert item.quads[1][:, 0].max() == 100  # cut to the image
    assert count_problems([item])["degenerate"] == 1


def test_a_bow_tie_is_reordered_and_a_collinear_box_refused():
    q, problem = check_box([0, 0, 50, 20, 50, 0, 0, 20], None)  # crossed corners: fixed
    assert problem is None and polygon_area(q) == pytest.approx(1000)
    assert check_box([0, 0, 10, 10, 20, 20, 30, 30], None) == (None, "degenerate")


def test_paddle_label_txt(tmp_path):
    from PIL import Image

    (tmp_path / "imgs").mkdir()
    Image.new("RGB", (200, 100)).save(tmp_path / "imgs" / "x.jpg")
    boxes = [
        {"transcription": "你好", "points": [[10, 10], [90, 10], [90, 40], [10, 40]]},
        {
            "transcription": "x",
            "points": [[100, 10], [150, 10], [150, 40], [100, 40]],
            "difficult": True,
        },
    ]
    (tmp_path / "imgs" / "Label.txt").write_text(
        f"imgs/x.jpg\t{json.dumps(boxes, ensure_ascii=False)}\n", encoding="utf-8"
    )
    (item,) = read_paddle_label(tmp_path / "imgs" / "Label.txt")
    assert item.texts == ["你好", "###"] and item.ignore.tolist() == [False, True]
    assert find_labelled(tmp_path / "imgs")[0].texts == item.texts
    (tmp_path / "imgs" / "Label.txt").write_text("imgs/x.jpg no tab here\n")
    with pytest.raises(DataError, match="Label.txt"):
        read_paddle_label(tmp_path / "imgs" / "Label.txt")


def test_the_validation_split_is_by_image_and_stable(tmp_path):
    from crnn.data.quads import LabelledImage

    items = [
        LabelledImage(tmp_path / f"{i}.jpg", np.zeros((0, 4, 2)), [], np.zeros(0, bool))
        for i in range(200)
    ]
    train, val = split_by_image(items, 0.1)
    assert 8 <= len(val) <= 35 and len(train) + len(val) == 200
    _, val_more = split_by_image(
        items + [LabelledImage(tmp_path / "new.jpg", np.zeros((0, 4, 2)), [], np.zeros(0, bool))],
        0.1,
    )
    assert {v.image for v in val} <= {v.image for v in val_more}


# ---- geometry and targets ---------------------------------------------------------------


def test_offset_moves_every_edge_by_the_distance():
    q = quad(0, 0, 100, 20)
    assert offset_polygon(q, -4).round(6).tolist() == quad(4, 4, 96, 16).tolist()
    assert offset_polygon(q, 3).round(6).tolist() == quad(-3, -3, 103, 23).tolist()
    assert offset_polygon(q, -10.5) is None  # thinner than twice the distance


def test_shrunk_kernel_and_threshold_border():
    q = quad(20, 20, 120, 44)
    t = make_targets(q[None], np.array([False]), (64, 160))
    d = shrink_distance(q, 0.4)  # A (1 - r^2) / L = 2400 * 0.84 / 248
    assert d == pytest.approx(2400 * 0.84 / 248)
    ys, xs = np.nonzero(t.prob)
    assert xs.min() == pytest.approx(20 + d, abs=1.01) and ys.max() == pytest.approx(
        44 - d, abs=1.01
    )
    # On the edge the threshold is highest, at the grown border's edge lowest.
    assert t.thresh[32, 20] == pytest.approx(0.7, abs=0.02)
    assert t.thresh[32, int(20 - d) + 1] < 0.45
    assert t.thresh_mask[32, 20] == 1 and t.thresh_mask[2, 2] == 0


def test_dont_care_and_tiny_lines_are_masked_not_taught():
    qs = np.stack([quad(10, 10, 60, 40), quad(70, 10, 150, 15)])  # a don't-care, one 5 px high
    t = make_targets(qs, np.array([True, False]), (64, 160))
    assert t.prob.sum() == 0
    assert t.prob_mask[25, 30] == 0 and t.prob_mask[12, 100] == 0 and t.prob_mask[50, 30] == 1


def test_post_processing_gives_back_the_labelled_lines():
    """Targets -> (the kernel as a perfect probability map) -> boxes: the unclip grows
    the kernels back to lines that match at ICDAR's IoU, a rotated one included (DBNet's
    unclip ratio 1.5 undoes the shrink of a squarish box exactly, and gives a thin line
    back thinner: the learnt map spreads past the kernel)."""
    lines = [quad(20, 20, 220, 50), quad(30, 80, 120, 140)]
    centre = (200.0, 200.0)
    rot = cv2.getRotationMatrix2D(centre, 20, 1.0)
    tilted = cv2.transform(quad(120, 180, 320, 216)[None], rot)[0]
    lines.append(tilted.astype(np.float32))
    qs = np.stack(lines)
    t = make_targets(qs, np.zeros(3, bool), (300, 400))
    found = boxes_from_map(t.prob, (1.0, 1.0), (400, 300))
    counts = match_image([d.quad for d in found], qs, np.zeros(3, bool))
    assert counts.as_list() == [3, 3, 3]
    assert match_image([d.quad for d in found], qs[1:2], np.zeros(1, bool), iou=0.95).matched == 1


def test_post_processing_scales_to_the_input_and_drops_weak_regions():
    prob = np.zeros((50, 100), np.float32)
    prob[10:20, 10:60] = 0.9
    prob[30:40, 10:60] = 0.45  # over the 0.3 threshold, under the 0.6 box score
    (d,) = boxes_from_map(prob, (2.0, 2.0), (200, 100))
    x0, y0 = d.quad.min(axis=0)
    x1, y1 = d.quad.max(axis=0)
    # The 50 x 10 region grown by A u / L = 5.7 map pixels, then doubled.
    assert 4 < x0 < 12 and 125 < x1 < 135 and 4 < y0 < 12 and 45 < y1 < 55


def _fake_network(seen: list):
    """A map function that finds a line (its kernel at 0.27-0.63 of the image's width and
    0.45-0.55 of its height) whole only while the kernel is at most 24 px high on the
    network's input, and only its two ends above that: a detector whose field of view is
    too small for a large headline. It records the input sizes it is given."""

    def prob_map(batch: np.ndarray) -> np.ndarray:
        _, _, h, w = batch.shape
        seen.append((w, h))
        content = batch[0, 0] > 0  # the image is white on the zero padding
        cw = int(content.any(axis=0).sum())
        ch = int(content.any(axis=1).sum())
        prob = np.zeros((1, 1, h, w), np.float32)
        if 0.1 * ch <= 24:
            prob[0, 0, int(0.45 * ch) : int(0.55 * ch), int(0.27 * cw) : int(0.63 * cw)] = 0.9
        else:  # only its two ends, as fragments
            prob[0, 0, int(0.45 * ch) : int(0.55 * ch), int(0.27 * cw) : int(0.32 * cw)] = 0.9
            prob[0, 0, int(0.45 * ch) : int(0.55 * ch), int(0.58 * cw) : int(0.63 * cw)] = 0.9
        return prob

    return prob_map


def test_a_headline_too_large_for_the_first_scale_comes_back_whole_from_the_half_scale():
    from crnn.detect.detector import READ_ENLARGE, READ_PYRAMID, detect

    image = np.full((400, 640, 3), 255, np.uint8)
    seen: list = []
    fine = detect(image, _fake_network(seen), limit_side=640)
    assert len(fine) == 2 and seen == [(640, 416)]  # the two fragments, one look
    seen.clear()
    (whole,) = detect(
        image, _fake_network(seen), limit_side=640, enlarge=READ_ENLARGE, pyramid=READ_PYRAMID
    )
    assert seen == [(640, 416), (320, 224)]  # the fragments give way to the coarse line
    x0, y0 = whole.quad.min(axis=0)
    x1, y1 = whole.quad.max(axis=0)
    assert x0 < 0.27 * 640 and x1 > 0.63 * 640 and 150 < y0 < 180 and 220 < y1 < 250


def test_a_headline_in_weak_pieces_gives_way_to_the_surer_coarse_line():
    """The first look finds a headline as pieces that cover most of it, weakly; the half
    look finds it whole and surer: the whole line replaces the pieces. Pieces surer than
    the coarse line stay."""
    from crnn.detect.detector import READ_PYRAMID, detect
    from crnn.detect.postprocess import DetOptions

    def network(piece: float, whole: float):
        def prob_map(batch: np.ndarray) -> np.ndarray:
            _, _, h, w = batch.shape
            prob = np.zeros((1, 1, h, w), np.float32)
            if w <= 320:
                prob[0, 0, 90:110, 60:260] = whole
            else:  # two pieces over most of it
                prob[0, 0, 180:220, 120:300] = piece
                prob[0, 0, 180:220, 330:520] = piece
            return prob

        return prob_map

    image = np.full((400, 640, 3), 255, np.uint8)
    opts = DetOptions(box_thresh=0.3)
    (whole,) = detect(image, network(0.45, 0.8), opts, 640, pyramid=READ_PYRAMID)
    assert whole.quad[:, 0].min() < 120 and whole.quad[:, 0].max() > 520
    assert len(detect(image, network(0.9, 0.8), opts, 640, pyramid=READ_PYRAMID)) == 2


def test_two_rows_the_map_joins_weakly_are_parted():
    """Two stacked rows that the probability map joins above 0.3 (a bridge at 0.38) but
    holds apart above ``split_thresh`` come back as two lines; a row whose weak middle
    leaves one piece too small (under ``split_share`` of the region) stays one, and so
    does a line parted along itself by less than its thickness (a thin character)."""
    from crnn.detect.postprocess import DetOptions

    prob = np.zeros((120, 200), np.float32)
    prob[20:45, 20:180] = 0.9
    prob[45:60, 20:180] = 0.38  # the bridge between the rows
    prob[60:85, 20:180] = 0.9
    opts = DetOptions(box_thresh=0.3)
    rows = boxes_from_map(prob, (1.0, 1.0), (200, 120), opts)
    assert len(rows) == 2
    assert sorted(round(float(d.quad[:, 1].mean())) for d in rows) == [32, 72]
    assert (
        len(
            boxes_from_map(prob, (1.0, 1.0), (200, 120), DetOptions(box_thresh=0.3, split_thresh=0))
        )
        == 1
    )
    prob[60:85, 20:180] = 0.38
    prob[60:85, 20:40] = 0.9  # a piece of 500 px against a region of 10,400
    assert len(boxes_from_map(prob, (1.0, 1.0), (200, 120), opts)) == 1
    # One line, weak over a thin character (a gap under the line's thickness): one line;
    # two groups of it set apart by more than its thickness: two.
    line = np.zeros((120, 300), np.float32)
    line[40:70, 20:130] = 0.9
    line[40:70, 130:150] = 0.38
    line[40:70, 150:280] = 0.9
    assert len(boxes_from_map(line, (1.0, 1.0), (300, 120), opts)) == 1
    line[40:70, 150:175] = 0.38
    assert len(boxes_from_map(line, (1.0, 1.0), (300, 120), opts)) == 2


def test_the_coarse_look_keeps_a_line_only_from_its_own_box_score():
    """A weak region seen only at the half scale (a large crop's characters in pieces,
    more often than a headline) is no line under ``COARSE_BOX_THRESH``, though the first
    look keeps lines from the detector's own lower score."""
    from crnn.detect.detector import COARSE_BOX_THRESH, READ_PYRAMID, detect
    from crnn.detect.postprocess import DetOptions

    def coarse_only(p: float):
        def prob_map(batch: np.ndarray) -> np.ndarray:
            _, _, h, w = batch.shape
            prob = np.zeros((1, 1, h, w), np.float32)
            if w <= 320:  # the half look of a 640-wide image
                prob[0, 0, 90:110, 80:240] = p
            return prob

        return prob_map

    image = np.full((400, 640, 3), 255, np.uint8)
    opts = DetOptions(box_thresh=0.3)
    weak, strong = COARSE_BOX_THRESH - 0.05, COARSE_BOX_THRESH + 0.05
    assert weak > opts.box_thresh
    assert detect(image, coarse_only(weak), opts, 640, pyramid=READ_PYRAMID) == []
    assert len(detect(image, coarse_only(strong), opts, 640, pyramid=READ_PYRAMID)) == 1


def test_a_small_image_is_enlarged_for_the_detector_and_its_lines_come_back_on_it():
    from crnn.detect.detector import detect

    image = np.full((100, 160, 3), 255, np.uint8)
    seen: list = []
    (line,) = detect(image, _fake_network(seen), limit_side=320, enlarge=4.0)
    assert seen == [(320, 224)]  # the long side brought to 320 (x2), 200 padded up to 224
    x0, y0 = line.quad.min(axis=0)
    x1, y1 = line.quad.max(axis=0)
    assert 30 < x0 < 0.27 * 160 and 0.63 * 160 < x1 < 115 and 35 < y0 < 45 and 55 < y1 < 65
    seen.clear()
    detect(image, _fake_network(seen), limit_side=320, enlarge=1.5)
    assert seen == [(256, 160)]  # enlarged by at most 1.5: 240 x 150, padded
    seen.clear()
    detect(image, _fake_network(seen), limit_side=320)
    assert seen == [(160, 128)]  # training's validation: never enlarged


# ---- metrics ----------------------------------------------------------------------------


def test_icdar_matching_with_dont_care():
    gts = np.stack([quad(0, 0, 100, 20), quad(0, 40, 100, 60), quad(0, 80, 100, 100)])
    ignore = np.array([False, False, True])
    dets = [quad(2, 1, 100, 21), quad(0, 40, 40, 60), quad(5, 82, 95, 98), quad(200, 200, 250, 220)]
    c = match_image(dets, gts, ignore)
    # det 0 matches, det 1 is too small (IoU 0.4), det 2 lies in the don't care (set aside),
    # det 3 is false; 2 legible lines.
    assert c.as_list() == [1, 3, 2]
    assert c.compute()["precision"] == pytest.approx(1 / 3)
    assert c.compute()["recall"] == pytest.approx(0.5)
    total = DetCounts()
    total.add(c)
    total.add(match_image([], gts[:1], ignore[:1]))
    assert total.as_list() == [1, 3, 3]


def test_one_detection_matches_one_line():
    gts = np.stack([quad(0, 0, 100, 20), quad(0, 0, 100, 20)])
    c = match_image([quad(0, 0, 100, 20)], gts, np.zeros(2, bool))
    assert c.as_list() == [1, 1, 2]


# ---- order and cut ----------------------------------------------------------------------


def test_reading_order_rows_then_columns():
    d = lambda q: Detection(q, 1.0)  # noqa: E731
    a, b = d(quad(300, 10, 500, 60)), d(quad(10, 20, 200, 50))  # one row: b then a
    c = d(quad(10, 100, 400, 130))
    col1, col2 = d(quad(10, 200, 40, 400)), d(quad(60, 200, 90, 400))  # columns right to left
    assert reading_order([col1, c, a, col2, b]) == [b, a, c, col2, col1]


def test_leaning_lines_are_read_row_by_row_in_their_own_frame():
    """A sign photographed at an angle: three lines rising 12 degrees to the right, one
    above the other. Their bounding boxes overlap by more than half, and upright rows
    took them for one row read by their left edges (the phone numbers of the peer
    suite's sign came back in the wrong order)."""
    import math

    def leaning(x0, y0, length, height, degrees):
        a = math.radians(-degrees)
        ux, uy = np.array([math.cos(a), math.sin(a)]), np.array([-math.sin(a), math.cos(a)])
        p0 = np.array([x0, y0], float)
        return Detection(
            np.stack(
                [p0, p0 + length * ux, p0 + length * ux + height * uy, p0 + height * uy]
            ).astype(np.float32),
            1.0,
        )

    top, middle, bottom = (
        leaning(40, 100, 400, 30, 12),
        leaning(20, 140, 420, 30, 12),
        leaning(0, 180, 440, 30, 12),
    )
    assert reading_order([bottom, middle, top]) == [top, middle, bottom]
    # Upright lines keep the upright rows (a slope under 3 degrees changes nothing).
    a, b = Detection(quad(300, 10, 500, 60), 1.0), Detection(quad(10, 20, 200, 50), 1.0)
    assert reading_order([a, b]) == [b, a]


def test_cut_line_straightens_a_perspective_quadrilateral():
    img = np.full((200, 300, 3), 255, np.uint8)
    src = np.array([[50, 60], [250, 40], [260, 120], [40, 110]], np.float32)
    # Draw a black bar inside the quadrilateral's middle third of height.
    inner = src.copy()
    inner[[0, 1], 1] += 20
    inner[[2, 3], 1] -= 20
    cv2.fillPoly(img, [inner.astype(np.int32)], (0, 0, 0))
    out = cut_line(img, src)
    assert out.shape[1] > 2.5 * out.shape[0]
    dark_rows = np.nonzero((out[:, :, 0] < 128).mean(axis=1) > 0.8)[0]
    assert len(dark_rows) > 0.2 * out.shape[0]
    assert dark_rows.min() > 0.15 * out.shape[0] and dark_rows.max() < 0.85 * out.shape[0]


def test_create_lmdb_cuts_a_labelled_detection_set_into_lines(tmp_path):
    """One labelled set trains both halves: --quads cuts each legible line
    perspective-corrected (the reader's cut) into an LMDB; ### and columns left out."""
    from PIL import Image

    from crnn.cli.create_lmdb import main
    from crnn.data.lmdb import LmdbReader

    (tmp_path / "set" / "images").mkdir(parents=True)
    (tmp_path / "set" / "labels").mkdir()
    img = np.full((120, 200, 3), 230, np.uint8)
    cv2.rectangle(img, (20, 20), (180, 44), (10, 10, 10), -1)
    Image.fromarray(img).save(tmp_path / "set" / "images" / "a.png")
    (tmp_path / "set" / "labels" / "a.txt").write_text(
        "20,20,20,44,180,44,180,20,价格,9.9元\n20,60,20,70,100,70,100,60,###\n150,50,170,50,170,115,150,115,竖排\n",
        encoding="utf-8",
    )
    assert main(["--root", str(tmp_path / "set"), "--quads", "--out", str(tmp_path / "lmdb")]) == 0
    reader = LmdbReader(tmp_path / "lmdb")
    assert len(reader) == 1
    assert reader.label(0) == "价格,9.9元"
    w, h = Image.open(io.BytesIO(reader.image_bytes(0))).size
    assert w > 5 * h


def test_create_lmdb_holds_out_whole_images_of_a_labelled_set(tmp_path):
    """--quads --val-fraction splits by image: every line of an image lands on one side
    (a split by line crop put lines of one image in training and validation both), and
    --seed with the detector's train.seed holds out the detector's validation images."""
    from PIL import Image

    from crnn.cli.create_lmdb import main
    from crnn.data.lmdb import LmdbReader
    from crnn.data.quads import find_labelled, split_by_image

    root = tmp_path / "set"
    (root / "images").mkdir(parents=True)
    (root / "labels").mkdir()
    img = np.full((120, 200, 3), 230, np.uint8)
    for y in (10, 40, 70):
        cv2.rectangle(img, (20, y), (180, y + 20), (10, 10, 10), -1)
    for n in range(12):
        Image.fromarray(img).save(root / "images" / f"im{n}.png")
        rows = [
            f"20,{y},180,{y},180,{y + 20},20,{y + 20},t{n}_{k}" for k, y in enumerate((10, 40, 70))
        ]
        (root / "labels" / f"im{n}.txt").write_text("\n".join(rows) + "\n", encoding="utf-8")
    args = ["--root", str(root), "--quads", "--out", str(tmp_path / "tr")]
    args += ["--val-fraction", "0.3", "--val-out", str(tmp_path / "va"), "--seed", "42"]
    assert main(args) == 0
    train, val = LmdbReader(tmp_path / "tr").labels(), LmdbReader(tmp_path / "va").labels()
    assert sorted(train + val) == sorted(f"t{n}_{k}" for n in range(12) for k in range(3))
    held = {label.split("_")[0] for label in val}
    assert held and not held & {label.split("_")[0] for label in train}
    _, det_val = split_by_image(find_labelled(root), 0.3, 42)
    assert held == {item.image.stem.replace("im", "t") for item in det_val}

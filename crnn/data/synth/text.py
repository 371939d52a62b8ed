"""Text sources for the synthetic generator: words, numbers, dates, prices, codes,
random strings, multi-word lines and pieces of a text corpus in any language, mixed in
the proportions of ``SynthConfig``.

Every source draws from a ``random.Random`` it is handed, so a text is a pure function
of that generator's state. Texts are returned as they are drawn on the image (mixed
case included); the label is ``charset.normalize(text)``.
"""

from __future__ import annotations

import datetime
import logging
import os
import random
from collections.abc import Callable, Sequence
from typing import Any

from crnn.data.synth.words import (  # noqa: F401 (re-exported)
    BUNDLED_WORD_LISTS,
    Corpus,
    CorpusError,
    WordList,
    bundled_chinese_words,
    bundled_word_list,
    load_corpus,
    load_words,
)

log = logging.getLogger(__name__)

_MONTHS = (
    "January February March April May June July August September October November December"
).split()
_WEEKDAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
_CURRENCY_PREFIX = ("$", "$", "$", "£", "€", "¥", "USD ", "EUR ", "Rs.", "CHF ")
_CURRENCY_SUFFIX = ("€", " EUR", " USD", "$", " kr", "p")
_CODE_PREFIX = ("#", "No.", "NO ", "ID:", "SN ", "REF-", "Ref. ", "P/N ", "Tel. ", "Fig. ", "")
_UNITS = (
    "kg",
    "g",
    "km",
    "m",
    "cm",
    "mm",
    "ml",
    "L",
    "lb",
    "oz",
    "ft",
    "in",
    "mph",
    "km/h",
    "V",
    "W",
)
_WRAPS = (("(", ")"), ('"', '"'), ("'", "'"), ("[", "]"), ("<", ">"), ("*", "*"), ("{", "}"))
_TRAILING = ".,;:!?.,"
# Chinese lines: what numbers count, how dates are written, quotes and brackets, and the
# punctuation between clauses and at the end of a sentence.
_ZH_UNITS = (
    "元 年 月 日 号 个 人 次 米 公里 千克 吨 万 亿 % 点 分 秒 岁 页 章 条 家 件 位 名 台 辆 "
    "平方米 公斤 小时 分钟 天 周 倍 度 毫升 克 户 所 项 批 层 室 路 元/斤"
).split()
_ZH_QUOTES = (
    ("“", "”"),
    ("「", "」"),
    ("《", "》"),
    ("（", "）"),
    ("【", "】"),
    ("『", "』"),
    ("‘", "’"),
    ("〔", "〕"),
    ('"', '"'),
    ("(", ")"),
)
# Shares as in print: … ended one sentence in seven and was read for 。 on unseen print
# (the Chinese development rows); now one in fourteen, and a sixteenth of the clause marks.
_ZH_CLAUSE = "，，，，，，，、、、；；：：—…"
_ZH_END = "。。。。。。。。！！？？；…"
# Speech inside quotes ends with its own mark before the closing quote (：“……。”), and
# quotes meet (”“): the closing ” after 。！？ was read as " or “ on the scanned pages.
_ZH_SPEECH_END = "。。。！？，…"
_ZH_HALF = {"，": ",", "。": ".", "：": ":", "；": ";", "？": "?", "！": "!", "（": "(", "）": ")"}
_ACRONYMS = (
    "GDP",
    "CPU",
    "APP",
    "AI",
    "5G",
    "USB",
    "PDF",
    "WiFi",
    "Wi-Fi",
    "iPhone",
    "CEO",
    "NBA",
    "WTO",
    "DNA",
    "PM2.5",
    "LED",
    "GPS",
    "VIP",
    "ID",
    "OK",
    "PPT",
    "Excel",
    "Python",
    "Linux",
    "HTTP",
    "IT",
    "KTV",
    "ATM",
    "3D",
    "4K",
    "No.",
    "CT",
    "IPO",
)
_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_LOWER = "abcdefghijklmnopqrstuvwxyz"
_DIGITS = "0123456789"


class TextSampler:
    """Draws the texts to render.

    Args:
        alphabet: the characters that may appear on an image: those whose normalised
            form the charset encodes and that at least one font can draw. May hold the
            space (then multi-word lines are drawn).
        cfg: a ``SynthConfig`` (weights ``p_word`` ... ``p_line``, case and length).
        normalize: the charset's ``normalize``; lengths are checked on its output.
        word_list: one word per line; words with characters outside ``alphabet`` are
            dropped.
    """

    def __init__(
        self,
        alphabet: str,
        cfg: Any,
        normalize: Callable[[str], str],
        word_list: str | os.PathLike[str],
    ) -> None:
        self.alphabet = "".join(sorted(set(alphabet)))
        self.allowed = frozenset(self.alphabet)
        self.cfg = cfg
        self.normalize = normalize
        self.word_list = str(word_list)
        self.word_power = getattr(cfg, "word_weight_power", 0.5)
        # Characters for random strings: no space (it would start or end a label).
        self.random_chars = self.alphabet.replace(" ", "")
        self.punct = "".join(c for c in self.random_chars if not c.isalnum())
        self.has_space = " " in self.allowed
        self._words: WordList | None = None
        # CJK punctuation the charset holds, for phrases (clauses and quotes).
        self.cjk_punct = "".join(c for c in "，。、；：？！" if c in self.allowed)
        # Full-width forms of the charset's ASCII that may be drawn (the charset reads
        # them as ASCII): only when the fonts draw them and p_fullwidth asks for them.
        self.p_fullwidth = float(getattr(cfg, "p_fullwidth", 0.0))
        self.fullwidth = {
            c: chr(ord(c) - 0x21 + 0xFF01)
            for c in self.alphabet
            if "!" <= c <= "~" and chr(ord(c) - 0x21 + 0xFF01) in self.allowed
        }
        self.random_chars = "".join(c for c in self.random_chars if not "\uff01" <= c <= "\uff5e")
        self.punct = "".join(c for c in self.random_chars if not c.isalnum())
        self.corpus: Corpus | None = None
        if cfg.corpus:
            self.corpus = load_corpus(cfg.corpus, self.allowed, max(1, cfg.min_length))
            log.info("%s", self.corpus.report())
            if not len(self.corpus):
                raise CorpusError(
                    f"no text of corpus {', '.join(map(str, cfg.corpus))} can be drawn: none of "
                    f"its runs of at least {max(1, cfg.min_length)} characters is in the charset "
                    "and drawn by the fonts (check data.charset and --fonts)"
                )
        sources: list[tuple[float, Callable[[random.Random], str]]] = [
            (cfg.p_corpus if self.corpus is not None else 0.0, self._corpus),
            (cfg.p_word, self._word),
            (cfg.p_number, self._number),
            (cfg.p_date, self._date),
            (cfg.p_price, self._price),
            (cfg.p_code, self._code),
            (cfg.p_random, self._random),
            (cfg.p_line if self.has_space else 0.0, self._line),
            (getattr(cfg, "p_phrase", 0.0), self._phrase),
            (getattr(cfg, "p_sentence", 0.0), self._sentence),
            (getattr(cfg, "p_tech", 0.0), self._tech),
        ]
        sources = [(w, f) for w, f in sources if w > 0]
        total = sum(w for w, _ in sources)
        acc = 0.0
        self._cum: list[tuple[float, Callable[[random.Random], str]]] = []
        for w, f in sources:
            acc += w / total
            self._cum.append((acc, f))

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_words"] = None  # reloaded (and cached) in each process
        state["_en_words"] = None
        return state

    @property
    def words(self) -> WordList:
        if self._words is None:
            self._words = load_words(self.word_list, self.allowed, self.word_power)
            if not self._words:
                log.warning(
                    "no word of %s can be drawn with this charset and these fonts; "
                    "word texts fall back to random strings",
                    self.word_list,
                )
        return self._words

    # ---- public -----------------------------------------------------------------------

    def sample(self, r: random.Random) -> str:
        """A text whose normalised form is 1..max_length characters of the alphabet.

        Sources may produce characters the charset lacks (a "$" for alnum36); those are
        removed, and a text that ends up empty or too long is drawn again. After a few
        misses a random string is returned, which always fits.
        """
        for _ in range(8):
            u = r.random()
            source = self._cum[-1][1]
            for edge, f in self._cum:
                if u < edge:
                    source = f
                    break
            text = self._clean(source(r))
            if self.fullwidth and r.random() < self.p_fullwidth:
                text = self._to_fullwidth(r, text)
            if self._fits(text):
                return text
        return self._random(r)

    def _to_fullwidth(self, r: random.Random, text: str) -> str:
        """Digits and Latin letters (or every ASCII character) in full-width forms, as
        Chinese typesetting often writes them ("２０２３年", "ＡＢＣ公司")."""
        alnum_only = r.random() < 0.7
        fw = self.fullwidth
        return "".join(
            fw.get(c, c) if (c.isalnum() or not alnum_only) and c.isascii() else c for c in text
        )

    def _clean(self, text: str) -> str:
        allowed = self.allowed
        if all(c in allowed for c in text):
            out = text
        else:
            out = "".join(c for c in text if c in allowed)
        if self.has_space:
            out = " ".join(out.split())
        return out.strip()

    def _fits(self, text: str) -> bool:
        n = len(self.normalize(text))
        return self.cfg.min_length <= n <= self.cfg.max_length and bool(text)

    def _pick(self, r: random.Random, pool: str, fallback: str) -> str:
        chars = "".join(c for c in pool if c in self.allowed) or fallback
        return r.choice(chars)

    # ---- sources ----------------------------------------------------------------------

    def _word(self, r: random.Random) -> str:
        words = self.words
        if not words:
            return self._random(r)
        word = words.draw(r)
        u = r.random()
        cased = word
        if u < self.cfg.p_upper:
            cased = word.upper()
        elif u < self.cfg.p_upper + self.cfg.p_title:
            cased = word[:1].upper() + word[1:]
        if all(c in self.allowed for c in cased):
            # A charset without capitals (and no case folding) keeps the word as listed.
            word = cased
        if self.punct and r.random() < self.cfg.p_punct:
            word = self._punctuate(r, word)
        return word

    def _punctuate(self, r: random.Random, word: str) -> str:
        if r.random() < 0.6:
            return word + r.choice(_TRAILING)
        left, right = r.choice(_WRAPS)
        if r.random() < 0.5:
            return left + word + right
        # Anything from the charset, so rare punctuation is drawn next to letters too.
        return r.choice(self.punct) + word if r.random() < 0.5 else word + r.choice(self.punct)

    def _digits(self, r: random.Random, n: int) -> str:
        if n <= 1:
            return str(r.randrange(10))
        return str(r.randrange(1, 10)) + "".join(r.choice(_DIGITS) for _ in range(n - 1))

    def _number(self, r: random.Random) -> str:
        n = min(1 + int(r.expovariate(0.35)), 12)
        u = r.random()
        if u < 0.4:
            return self._digits(r, n)
        if u < 0.55:
            return f"{self._digits(r, min(n, 6))}.{self._digits(r, r.randint(1, 3))}"
        if u < 0.68:
            return f"{r.randrange(1000, 10 ** r.randint(4, 9)):,}"
        if u < 0.75:
            return f"{self._digits(r, r.randint(1, 2))}%"
        if u < 0.82:
            return r.choice("-+") + self._digits(r, min(n, 5))
        if u < 0.9:
            a, b, c = self._digits(r, 3), self._digits(r, 3), self._digits(r, 4)
            return r.choice((f"{b}-{c}", f"({a}) {b}-{c}", f"+1 {a} {b} {c}", f"{a}.{b}.{c}"))
        if u < 0.95:
            return f"{self._digits(r, r.randint(1, 3))}{r.choice(_UNITS)}"
        k = r.randrange(1, 100)
        suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
        return r.choice(
            (f"{k}{suffix}", f"{k}/{r.randrange(1, 100)}", f"{k}-{k + r.randrange(1, 50)}")
        )

    def _date(self, r: random.Random) -> str:
        d = datetime.date(1900, 1, 1) + datetime.timedelta(days=r.randrange(73000))
        month = _MONTHS[d.month - 1]
        y2 = d.year % 100
        forms = (
            f"{d.year}-{d.month:02d}-{d.day:02d}",
            f"{d.day:02d}/{d.month:02d}/{d.year}",
            f"{d.month}/{d.day}/{y2:02d}",
            f"{d.day:02d}.{d.month:02d}.{d.year}",
            f"{d.day} {month[:3]} {d.year}",
            f"{month} {d.day}, {d.year}",
            f"{month[:3].upper()} {d.day:02d}",
            f"{_WEEKDAYS[d.weekday()][:3]} {d.day}",
            f"{r.randrange(24):02d}:{r.randrange(60):02d}",
            f"{r.randrange(1, 13)}:{r.randrange(60):02d} {r.choice(('AM', 'PM', 'am', 'pm'))}",
            f"{r.randrange(24):02d}:{r.randrange(60):02d}:{r.randrange(60):02d}",
            str(d.year),
        )
        return r.choice(forms)

    def _price(self, r: random.Random) -> str:
        whole = r.randrange(1, 10 ** r.randint(1, 5))
        amount = f"{whole:,}" if r.random() < 0.3 else str(whole)
        if r.random() < 0.7:
            amount += f".{r.randrange(100):02d}"
        u = r.random()
        if u < 0.65:
            return r.choice(_CURRENCY_PREFIX) + amount
        if u < 0.85:
            return amount + r.choice(_CURRENCY_SUFFIX)
        return amount

    def _code(self, r: random.Random) -> str:
        upper = "".join(c for c in _UPPER if c in self.allowed) or _UPPER
        groups = []
        for _ in range(r.choice((1, 2, 2, 2, 3))):
            n = r.randint(1, 5)
            kind = r.random()
            if kind < 0.35:
                groups.append("".join(r.choice(upper) for _ in range(n)))
            elif kind < 0.65:
                groups.append("".join(r.choice(_DIGITS) for _ in range(n)))
            else:
                groups.append("".join(r.choice(upper + _DIGITS) for _ in range(n)))
        code = r.choice(("-", "-", " ", "/", ".", "", ":", "_")).join(groups)
        if r.random() < 0.1:
            code = code.lower()
        if r.random() < 0.25:
            code = r.choice(_CODE_PREFIX) + code
        return code

    def _corpus(self, r: random.Random) -> str:
        assert self.corpus is not None
        return self.corpus.sample(r, max(1, self.cfg.min_length), self.cfg.max_length)

    def _random(self, r: random.Random) -> str:
        lo = max(1, self.cfg.min_length)
        hi = max(lo, min(self.cfg.max_length, 12))
        n = r.randint(lo, hi)
        chars = self.random_chars or self.alphabet
        return "".join(r.choice(chars) for _ in range(n))

    def _phrase(self, r: random.Random) -> str:
        """Words run together as Chinese (and Japanese) write them: no spaces, a comma
        or other CJK punctuation between some, a number or code among them now and
        then, min_length..max_length characters."""
        words = self.words
        if not words:
            return self._random(r)
        target = r.randint(max(1, self.cfg.min_length), self.cfg.max_length)
        out = ""
        while len(out) < target:
            u = r.random()
            if u < 0.06:
                piece = self._number(r)
            elif u < 0.08:
                piece = self._date(r)
            elif u < 0.09:
                piece = self._code(r)
            else:
                piece = words.draw(r)
            piece = self._clean(piece).replace(" ", "")
            if not piece or len(out) + len(piece) > target and out:
                break
            out += piece
            if self.cjk_punct and r.random() < 0.12 and len(out) < target - 1:
                out += r.choice(self.cjk_punct)
        return out[: self.cfg.max_length]

    def _zh_mark(self, r: random.Random, marks: str) -> str:
        """One of ``marks`` (repeats weigh more), … weighted by ``data.synth.zh_ellipsis``;
        at 1 a plain ``r.choice``, so recipes without it keep their random stream."""
        if self.cfg.zh_ellipsis == 1.0:
            return r.choice(marks)
        return r.choices(marks, [self.cfg.zh_ellipsis if c == "…" else 1.0 for c in marks])[0]

    def _zh_number(self, r: random.Random) -> str:
        u = r.random()
        if u < 0.45:
            n = self._digits(r, min(1 + int(r.expovariate(0.45)), 9))
        elif u < 0.65:
            n = f"{self._digits(r, r.randint(1, 4))}.{self._digits(r, r.randint(1, 2))}"
        elif u < 0.75:
            n = f"{r.randrange(1000, 10 ** r.randint(4, 8)):,}"
        else:
            n = str(r.randrange(1, 100))
        return n + r.choice(_ZH_UNITS) if r.random() < 0.75 else n

    def _zh_date(self, r: random.Random) -> str:
        d = datetime.date(1950, 1, 1) + datetime.timedelta(days=r.randrange(32000))
        hm = f"{r.randrange(24)}:{r.randrange(60):02d}"
        return r.choice(
            (
                f"{d.year}年{d.month}月{d.day}日",
                f"{d.month}月{d.day}日",
                f"{d.year}年{d.month}月",
                f"{d.year}年",
                f"{d.year}-{d.month:02d}-{d.day:02d}",
                f"{d.year}.{d.month}.{d.day}",
                f"{d.year}/{d.month:02d}/{d.day:02d}",
                hm,
                f"{r.choice(('上午', '下午', '晚上'))}{hm}",
                f"{d.month}月{d.day}日{hm}",
                f"{d.year}年第{r.randint(1, 4)}季度",
            )
        )

    def _latin(self, r: random.Random) -> str:
        u = r.random()
        if u < 0.4:
            return r.choice(_ACRONYMS)
        if u < 0.55:
            return "".join(r.choice(_UPPER) for _ in range(r.randint(2, 4)))
        if u < 0.65:
            return self._code(r)
        word = self._english.draw(r) if self._english else r.choice(_ACRONYMS)
        return word.capitalize() if r.random() < 0.3 else word

    @property
    def _english(self) -> WordList:
        if getattr(self, "_en_words", None) is None:
            self._en_words = load_words(bundled_word_list(), self.allowed, self.word_power)
        return self._en_words

    def _sentence(self, r: random.Random) -> str:
        """Lines as Chinese text is printed: words in clauses (，、；：— between them),
        quotes and brackets (“”「」《》（）...), numbers with units, dates and times, Latin
        words and acronyms, and sometimes half-width punctuation; the end of a sentence
        (。！？…) or a line broken mid-sentence. min_length..max_length characters."""
        words = self.words
        if not words:
            return self._random(r)
        target = r.randint(max(1, self.cfg.min_length), self.cfg.max_length)
        half = r.random() < 0.12  # ASCII punctuation in a Chinese line
        out = ""
        while len(out) < target:
            u = r.random()
            if u < 0.72:
                piece = words.draw(r)
            elif u < 0.80:
                piece = self._zh_number(r)
            elif u < 0.84:
                piece = self._zh_date(r)
            elif u < 0.90:
                piece = self._latin(r)
                if out and r.random() < 0.3:
                    piece = " " + piece + " "
            else:
                left, right = r.choice(_ZH_QUOTES) if r.random() < 0.5 else r.choice(_ZH_QUOTES[:2])
                inner = "".join(words.draw(r) for _ in range(r.randint(1, 3)))
                if (
                    left in "“「" and r.random() < 0.5
                ):  # speech: its own end mark, maybe a colon before
                    inner += self._zh_mark(r, _ZH_SPEECH_END)
                    left = ("：" if out and r.random() < 0.4 else "") + left
                piece = left + inner + right
            piece = self._clean_piece(piece)
            if not piece or len(out) + len(piece) > target and out:
                break
            out += piece
            if r.random() < 0.14 and len(out) < target - 1:
                out += self._zh_mark(r, _ZH_CLAUSE)
        if len(out) < self.cfg.max_length and r.random() < 0.45:
            out += self._zh_mark(r, _ZH_END)
        if half:
            out = "".join(_ZH_HALF.get(c, c) for c in out)
        return out[: self.cfg.max_length]

    def _tech(self, r: random.Random) -> str:
        """Chinese as technical and commercial text prints it: words among command options
        (``-a``, ``--max-width=800``), hex (``0x1F``), calls (``sp16()``), file names and
        paths, URLs and mail addresses, versions and model numbers, operators (``+``,
        ``***``, ``I/O``), numbers with Latin units (``3.5GHz``), paired quotes and
        brackets with nothing between them, ASCII and full-width punctuation side by side,
        and spaces around the Latin tokens half the time. min_length..max_length characters."""
        words = self.words
        if not words:
            return self._random(r)
        target = r.randint(max(4, self.cfg.min_length), self.cfg.max_length)
        spaced = r.random() < 0.5
        out = ""
        while len(out) < target:
            if r.random() < (0.75 if not out else 0.5):  # most lines start in Chinese
                piece = words.draw(r)
            else:
                piece = _tech_token(r, self._english)
                if spaced and out and piece[:1].isascii() and piece[:1].isalnum():
                    piece = f" {piece} "
            piece = self._clean_piece(piece)
            if not piece or len(out) + len(piece) > target and out:
                break
            out += piece
            if r.random() < 0.15 and len(out) < target - 1:
                out += r.choice(_TECH_MARKS)
        return " ".join(out.split())[: self.cfg.max_length].strip()

    def _clean_piece(self, piece: str) -> str:
        allowed = self.allowed
        if all(c in allowed for c in piece):
            return piece
        return "".join(c for c in piece if c in allowed)

    def _line(self, r: random.Random) -> str:
        tokens: list[str] = []
        target = r.randint(2, max(2, self.cfg.line_max_words))
        length = -1
        while len(tokens) < target:
            u = r.random()
            tok = self._word(r) if u < 0.75 else self._number(r) if u < 0.9 else self._code(r)
            tok = self._clean(tok).replace(" ", "")
            if not tok:
                continue
            if length + 1 + len(tok) > self.cfg.max_length:
                break
            tokens.append(tok)
            length += 1 + len(tok)
        return " ".join(tokens)


# Technical Chinese's punctuation: full-width and ASCII marks, and the two side by side.
_TECH_MARKS = ("，", "。", "：", "；", "、", ",", ".", ":", ";", "，,", "(（", "）)", "：:", "!！")
_TECH_EMPTY = ("‘’", "“”", '""', "''", "（）", "()", "【】", "[]", "「」", "《》", "{}")
_TECH_OPERATORS = (
    "+",
    "-",
    "*",
    "/",
    "=",
    "==",
    "!=",
    "<=",
    ">=",
    "&&",
    "||",
    "|",
    "***",
    "**",
    "->",
    "=>",
    "~",
    "^",
    "%",
    "#",
    "@",
    "&",
    "\\",
    "...",
    "--",
    "++",
    "+=",
    "<<",
)
_TECH_SLASHED = ("I/O", "TCP/IP", "A/B", "B/S", "C/S", "Y/N", "R/W", "km/h", "m/s", "kg/m3")
_TECH_UNITS = (
    "V",
    "A",
    "W",
    "Hz",
    "kHz",
    "MHz",
    "GHz",
    "GB",
    "MB",
    "KB",
    "TB",
    "mm",
    "cm",
    "m",
    "kg",
    "g",
    "mAh",
    "ms",
    "s",
    "%",
    "dB",
    "px",
    "dpi",
    "ml",
    "L",
    "℃",
    "°C",
)
_TECH_EXT = (
    "txt",
    "py",
    "c",
    "h",
    "cpp",
    "js",
    "json",
    "yaml",
    "md",
    "pdf",
    "png",
    "jpg",
    "zip",
    "exe",
    "sh",
    "log",
    "xml",
    "csv",
    "docx",
    "xlsx",
    "html",
    "so",
    "dll",
)
_TECH_HOSTS = ("com", "cn", "com.cn", "net", "org", "gov.cn", "edu.cn", "io")


def _ident(r: random.Random, lo: int = 1, hi: int = 8) -> str:
    """A made-up identifier: lower case, sometimes with digits, an underscore or capitals."""
    n = r.randint(lo, hi)
    s = "".join(r.choice(_LOWER) for _ in range(n))
    u = r.random()
    if u < 0.25:
        s += str(r.randrange(1, 100))
    elif u < 0.35 and n > 2:
        k = r.randrange(1, n)
        s = s[:k] + "_" + s[k:]
    elif u < 0.45:
        s = s.capitalize()
    elif u < 0.5:
        s = s.upper()
    return s


def _tech_token(r: random.Random, english: Any) -> str:
    """One technical token for :meth:`TextSampler._tech`."""
    u = r.random()
    digits = lambda lo, hi: str(r.randrange(10 ** (lo - 1) if lo > 1 else 0, 10**hi))  # noqa: E731
    if u < 0.1:  # command options
        name = english.draw(r).lower() if english and r.random() < 0.5 else _ident(r, 1, 6)
        if r.random() < 0.4:
            return "-" + r.choice(_LOWER + _UPPER) + (digits(1, 1) if r.random() < 0.2 else "")
        opt = "--" + name.replace(" ", "-")
        return opt + (r.choice(("=", " ")) + digits(1, 4) if r.random() < 0.4 else "")
    if u < 0.18:  # hex
        hexd = "0123456789ABCDEF" if r.random() < 0.6 else "0123456789abcdef"
        return r.choice(("0x", "0X", "#", "")) + "".join(
            r.choice(hexd) for _ in range(r.choice((1, 2, 2, 4, 4, 8)))
        )
    if u < 0.26:  # calls
        args = ", ".join(_ident(r, 1, 4) for _ in range(r.choice((0, 0, 1, 2))))
        return f"{_ident(r, 1, 8)}({args})"
    if u < 0.34:  # file names and paths
        name = f"{_ident(r, 2, 10)}.{r.choice(_TECH_EXT)}"
        v = r.random()
        if v < 0.3:
            return "/" + "/".join(_ident(r, 2, 6) for _ in range(r.randint(1, 3))) + "/" + name
        if v < 0.45:
            return "C:\\" + "\\".join(_ident(r, 2, 8) for _ in range(r.randint(1, 2))) + "\\" + name
        return name
    if u < 0.42:  # URLs and mail
        host = f"{_ident(r, 2, 8).lower()}.{r.choice(_TECH_HOSTS)}"
        v = r.random()
        if v < 0.3:
            return f"{_ident(r, 2, 8).lower()}@{host}"
        if v < 0.6:
            return "www." + host
        return (
            r.choice(("http://", "https://"))
            + host
            + ("/" + _ident(r, 1, 6) if r.random() < 0.5 else "")
        )
    if u < 0.52:  # versions and model numbers
        v = r.random()
        if v < 0.4:
            parts = [str(r.randrange(0, 20)) for _ in range(r.randint(2, 3))]
            return r.choice(("v", "V", "")) + ".".join(parts)
        letters = "".join(r.choice(_UPPER) for _ in range(r.randint(1, 4)))
        return (
            letters
            + r.choice(("", "-", " "))
            + digits(1, 4)
            + (r.choice(_UPPER) if r.random() < 0.3 else "")
        )
    if u < 0.62:  # operators, alone or between operands
        op = r.choice(_TECH_OPERATORS)
        if r.random() < 0.5:
            return op
        a = _ident(r, 1, 3) if r.random() < 0.5 else digits(1, 3)
        b = _ident(r, 1, 3) if r.random() < 0.5 else digits(1, 3)
        return a + op + b
    if u < 0.68:
        return r.choice(_TECH_SLASHED)
    if u < 0.78:  # numbers with Latin units, ranges and tolerances
        n = digits(1, 4) if r.random() < 0.6 else f"{r.randrange(100)}.{r.randrange(10)}"
        unit = r.choice(_TECH_UNITS)
        v = r.random()
        if v < 0.15:
            return f"±{n}{unit}"
        if v < 0.3:
            return f"{n}-{digits(1, 4)}{unit}"
        return n + (" " if r.random() < 0.2 else "") + unit
    if u < 0.88:  # paired quotes and brackets with nothing between
        return r.choice(_TECH_EMPTY)
    if english:  # an English word, as printed amid Chinese
        w = english.draw(r)
        return w.capitalize() if r.random() < 0.3 else w.upper() if r.random() < 0.1 else w
    return _ident(r)


def drawable_alphabet(charset_chars: Sequence[str], case_fold: bool) -> list[str]:
    """Characters that may be drawn for a charset: its own characters, plus, when the
    charset folds case, the capitals whose lower case it holds (an image may show "Cat"
    under the label "cat"). Control characters and whitespace other than the space are
    left out, since they leave no ink to learn from."""
    out: list[str] = []
    for c in charset_chars:
        if c == " " or (c.isprintable() and not c.isspace()):
            out.append(c)
        if case_fold:
            up = c.upper()
            if len(up) == 1 and up != c and up.lower() == c:
                out.append(up)
    return list(dict.fromkeys(out))

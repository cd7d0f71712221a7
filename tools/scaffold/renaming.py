"""How `nox -s new -- NAME --like OP` renames OP's files: OP's own identifiers become NAME's,
PyTorch's names and longer words stay (the rule, for users: docs/adding-an-operator.md).

OP is replaced where its words stand in a row among the `_`-separated words of an identifier or a
file name (`rms_norm`, `rms_norm_forward`, `test_rms_norm_errors`, `launch_rms_norm`), in lower
case or upper case (`RMS_NORM_BLOCK`), and in CamelCase at the start of a word (`RmsNormLayer`).
Left as they are:
- a longer word: `rms_normalize`, `weighted_squares`;
- PyTorch's names: an identifier right after `torch.`, `F.`, `functional.`, `nn.`, `aten.`,
  `aten::` or `at::` (`F.cross_entropy`, `torch.nn.functional.rms_norm`), or after `PyTorch's`,
  `torch's` or `aten's` in prose; and a private name that starts with `_` and another word
  (`_fused_rms_norm`);
- other libraries' module paths: every name of a dotted path that starts with one of
  OTHER_LIBRARIES (`liger_kernel.ops.rms_norm`);
- the package's own names (`custom_op`, `CUSTOM_OP_CHECK`), whatever OP is.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(r"[A-Za-z0-9_]+")
# What puts the identifier right after it in PyTorch's namespace.
_PYTORCH_QUALIFIER = re.compile(r"\b(?:torch|F|functional|nn|aten)\.|\b(?:aten|at)::|\b(?:PyTorch|torch|aten)'s `?")
# Packages whose module paths name ops of their own (the examples time Liger-Kernel's).
OTHER_LIBRARIES = ("liger_kernel",)
_OTHER_PATH = re.compile(rf"\b(?:{'|'.join(OTHER_LIBRARIES)})(?:\.\w+)+")
_LABEL = re.compile(r"(?:[\w.:]*|(?:PyTorch|torch|aten)'s `?)\Z")


class Renamer:
    """OP's identifiers as NAME's in a text or a path; `protected`: names never touched (the package's)."""

    def __init__(self, old: str, new: str, protected: tuple[str, ...] = ()) -> None:
        self.old, self.new = old, new
        self.spellings = [(old.split("_"), new.split("_")), (old.upper().split("_"), new.upper().split("_"))]
        self.camel = (_camel(old), _camel(new))
        self.protected = [words for name in protected for words in (name.split("_"), name.upper().split("_"))]

    def words(self, token: str) -> str:
        """`token` with OP's words, wherever they stand in a row, as NAME's; no exception."""
        words = token.split("_")
        keep = [False] * len(words)  # words of a protected name
        for run in self.protected:
            for i in _runs(words, run):
                keep[i : i + len(run)] = [True] * len(run)
        out, i = [], 0
        while i < len(words):
            for old, new in self.spellings:
                if words[i : i + len(old)] == old and not any(keep[i : i + len(old)]):
                    out += new
                    i += len(old)
                    break
            else:
                out.append(self._camel_word(words[i]) if not keep[i] else words[i])
                i += 1
        return "_".join(out)

    def _camel_word(self, word: str) -> str:
        old, new = self.camel
        rest = word[len(old) :]
        if word.startswith(old) and not (rest[:1].islower() or rest[:1].isdigit()):
            return new + rest
        return word

    def mentions(self, token: str) -> bool:
        return self.words(token) != token

    def is_pytorch_private(self, token: str) -> bool:
        """A private name that starts with another word: PyTorch's (`_fused_rms_norm`)."""
        if not token.startswith("_"):
            return False
        words = token.lstrip("_").split("_")
        starts = any(words[: len(old)] == old for old, _ in self.spellings) or self._camel_word(words[0]) != words[0]
        return not starts

    def text(self, text: str) -> tuple[str, list[str]]:
        """(the renamed text, PyTorch's names that mention OP and were left, as written)."""
        qualified = {m.end() for m in _PYTORCH_QUALIFIER.finditer(text)}
        qualified |= {t.start() for m in _OTHER_PATH.finditer(text) for t in _TOKEN.finditer(text, m.start(), m.end())}
        kept: list[str] = []

        def one(match: re.Match) -> str:
            token = match.group()
            if not self.mentions(token):
                return token
            if match.start() not in qualified and not self.is_pytorch_private(token):
                return self.words(token)
            label = _LABEL.search(text, max(0, match.start() - 80), match.start()).group() + token
            kept.append(label.replace("`", ""))
            return token

        return _TOKEN.sub(one, text), kept

    def path(self, path: str) -> str:
        """A file's path below the operator's folder: its names renamed as the text's are."""
        return self.text(path)[0]


def _camel(name: str) -> str:
    return "".join(word.capitalize() for word in name.split("_"))


def _runs(words: list[str], run: list[str]) -> list[int]:
    return [i for i in range(len(words) - len(run) + 1) if words[i : i + len(run)] == run]

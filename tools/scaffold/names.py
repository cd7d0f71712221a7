"""Which names an operator or a package may take; shared by `nox -s new` and `nox -s rename`."""

from __future__ import annotations

import keyword
import re

# C++ keywords and alternative tokens (C++20): a name is also a C++ namespace or identifier.
_CPP_KEYWORDS = """
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t
char32_t class compl concept const consteval constexpr constinit const_cast continue co_await
co_return co_yield decltype default delete do double dynamic_cast else enum explicit export extern
false float for friend goto if inline int long mutable namespace new noexcept not not_eq nullptr
operator or or_eq private protected public register reinterpret_cast requires return short signed
sizeof static static_assert static_cast struct switch template this thread_local throw true try
typedef typeid typename union unsigned using virtual void volatile wchar_t while xor xor_eq
"""
CPP_KEYWORDS = frozenset(_CPP_KEYWORDS.split())
SNAKE_CASE = re.compile(r"[a-z][a-z0-9_]*")


class NameError_(ValueError):
    """A name that cannot be used; the message says why and what would do."""


def check_identifier(name: str, what: str) -> None:
    if not SNAKE_CASE.fullmatch(name) or not name.isidentifier():
        raise NameError_(
            f"{what} {name!r} is not a valid name: use lower-case letters, digits and underscores, "
            "starting with a letter (snake_case, e.g. scaled_softplus)"
        )
    if keyword.iskeyword(name) or keyword.issoftkeyword(name):
        raise NameError_(f"{what} {name!r} is a Python keyword; choose another name")
    if name in CPP_KEYWORDS:
        raise NameError_(f"{what} {name!r} is a C++ keyword; choose another name")
    if "__" in name or name.endswith("_"):
        raise NameError_(f"{what} {name!r} has a double or trailing underscore, which C++ reserves or the API uses")

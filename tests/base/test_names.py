"""One tool-name pattern and one allocator for every operator's outer names."""

from __future__ import annotations

from toolbias.base.names import ALL_DOMAINS, MAX_NAME, NameAllocator, fit_name, is_tool_name, name_token


def test_the_pattern_is_openais_function_name_rule() -> None:
    assert is_tool_name("set_window-2")
    assert is_tool_name("x" * MAX_NAME)
    assert not is_tool_name("x" * (MAX_NAME + 1))
    assert not is_tool_name("")
    assert not is_tool_name("a.b")
    assert not is_tool_name(7)


def test_fit_name_makes_any_text_a_valid_stable_name() -> None:
    assert fit_name("math.factorial") == "math_factorial"
    assert fit_name("") == "tool"
    long_a, long_b = "a" * 80, "a" * 79 + "b"
    assert is_tool_name(fit_name(long_a)) and len(fit_name(long_a)) == MAX_NAME
    assert fit_name(long_a) == fit_name(long_a) != fit_name(long_b)
    assert name_token("  Front Left!! ") == "Front_Left"


def test_the_allocator_keeps_names_unique_where_tools_are_visible_together() -> None:
    names = NameAllocator()
    assert names.add("car", "begin") == "begin"
    assert names.add("car", "begin") == "begin_2"
    assert names.add("home", "begin") == "begin"          # another domain: its own names
    assert names.add(ALL_DOMAINS, "begin") == "begin_3"   # catalog scope: unique everywhere
    assert names.add("garden", "begin_3") == "begin_3_2"  # a domain sees the catalog-scope tools
    names.reserve("car", "kept")
    assert names.taken("car", "kept") and not names.taken("home", "kept")
    assert names.taken(ALL_DOMAINS, "kept")

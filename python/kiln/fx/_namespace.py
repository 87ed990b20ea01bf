"""Unique, valid Python names for Nodes and for the globals of generated code (torch.fx's
_Namespace), so that kiln.fx graphs get torch's names: `linear`, `relu`, `add`, `add_1`...

Rules, as torch: a candidate is snake_cased from the target (`MyInput` -> `my_input`), illegal
characters become `_` (`layers.0` -> `layers_0`), a leading digit gets a `_`; a name already
used, a keyword or a builtin (`list`, `getattr`) gets the next free `_<n>` suffix."""
import builtins
import keyword
import re

_snake_case_sub = re.compile(r"(?<=[a-z])([A-Z])").sub
_illegal_char_regex = re.compile("[^0-9a-zA-Z_]+")
# a valid identifier, split into base and optional numeric suffix
_name_regex = re.compile(r"^([a-zA-Z_][0-9a-zA-Z_]*?)(?:_(\d+))?$")

# Names generated code must not shadow; each maps to the object that may keep the name (a
# builtin may name itself: the global for `getattr` is `getattr`).
_illegal_names = {k: object() for k in keyword.kwlist}
_illegal_names.update(builtins.__dict__)


def _snake_case(s):
    """`mod.pascalCase` -> `mod.pascal_case`, `ALL_CAPS` -> `all_caps`."""
    return _snake_case_sub(r"_\1", s).lower()


def _is_magic(x):
    return x.startswith("__") and x.endswith("__")


class _Namespace:
    """Associates objects with unique names: each object one name, each name used once."""

    def __init__(self):
        self._obj_to_name = {}
        self._used_names = set()
        self._base_count = {}

    def create_name(self, candidate, obj):
        if obj is not None and obj in self._obj_to_name:
            return self._obj_to_name[obj]
        match = _name_regex.match(candidate)
        if match is None:
            candidate = _illegal_char_regex.sub("_", candidate) or "_unnamed"
            if candidate[0].isdigit():
                candidate = f"_{candidate}"
            match = _name_regex.match(candidate)
        base, num = match.group(1, 2)
        if num is None or candidate in self._used_names:
            num = self._base_count.get(base, 0)
            if _illegal_names.get(candidate, obj) is not obj:
                num += 1
                candidate = f"{base}_{num}"
        else:
            num = int(num)
        while candidate in self._used_names:
            num += 1
            candidate = f"{base}_{num}"
        self._used_names.add(candidate)
        self._base_count[base] = num
        if obj is not None:
            self._obj_to_name[obj] = candidate
        return candidate

    def associate_name_with_obj(self, name, obj):
        existing = self._obj_to_name.setdefault(obj, name)
        if existing is not name:
            raise AssertionError("obj is already associated")

    def _rename_object(self, obj, name):
        self._obj_to_name[obj] = name
        self._used_names.add(name)

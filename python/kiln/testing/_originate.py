"""Walks two (possibly nested) structures side by side and builds one comparison pair per
leaf. Sequences are matched by position, mappings by key; the path to each leaf is kept as
its id, which the error message prints as "The failure occurred for item [1]['w']"."""
import collections.abc
import contextlib

from ._errors import ErrorMeta, UnsupportedInputs


def _is_sequence(x, sequence_types):
    # str is excluded: "a"[0] is "a" again and the walk would never end.
    return isinstance(x, sequence_types) and not isinstance(x, str)


def originate_pairs(actual, expected, *, pair_types,
                    sequence_types=(collections.abc.Sequence,),
                    mapping_types=(collections.abc.Mapping,), id=(), **options):
    """The pairs of all leaves; raises ErrorMeta on a structural mismatch or when no pair
    type handles a leaf."""
    walk = dict(pair_types=pair_types, sequence_types=sequence_types,
                mapping_types=mapping_types, **options)
    if _is_sequence(actual, sequence_types) and _is_sequence(expected, sequence_types):
        if len(actual) != len(expected):
            raise ErrorMeta(AssertionError, f"The length of the sequences mismatch: "
                                            f"{len(actual)} != {len(expected)}", id=id)
        pairs = []
        for i in range(len(actual)):
            pairs.extend(originate_pairs(actual[i], expected[i], id=(*id, i), **walk))
        return pairs

    if isinstance(actual, mapping_types) and isinstance(expected, mapping_types):
        actual_keys, expected_keys = set(actual.keys()), set(expected.keys())
        if actual_keys != expected_keys:
            raise ErrorMeta(AssertionError,
                            f"The keys of the mappings do not match:\n"
                            f"Missing keys in the actual mapping: "
                            f"{sorted(expected_keys - actual_keys)}\n"
                            f"Additional keys in the actual mapping: "
                            f"{sorted(actual_keys - expected_keys)}", id=id)
        keys = actual_keys
        # Sorted where the keys allow it, so that the first failure reported is stable.
        with contextlib.suppress(Exception):
            keys = sorted(keys)
        pairs = []
        for key in keys:
            pairs.extend(originate_pairs(actual[key], expected[key], id=(*id, key), **walk))
        return pairs

    for pair_type in pair_types:
        try:
            return [pair_type(actual, expected, id=id, **options)]
        except UnsupportedInputs:
            continue
        except ErrorMeta:
            raise
        except Exception as error:
            where = "".join(str([item]) for item in id)
            raise RuntimeError(
                f"Originating a {pair_type.__name__}() at item {where} with\n\n"
                f"{type(actual).__name__}(): {actual}\n\nand\n\n"
                f"{type(expected).__name__}(): {expected}\n\n"
                f"resulted in the unexpected exception above (a bug in kiln.testing)."
            ) from error
    raise ErrorMeta(TypeError, f"No comparison pair was able to handle inputs of type "
                               f"{type(actual)} and {type(expected)}.", id=id)

"""A mypy plugin: ``.get`` of a key a TypedDict does not declare is an error, as ``d["key"]`` is.

mypy checks ``d["adminAcess"]`` against the TypedDict but lets ``d.get("adminAcess")`` through (it
types the answer ``object``), and most reads of optional API fields are ``.get``: with this, a
misspelt field of a kind typed by ``kube/apitypes.pyi`` is caught either way. pyproject.toml loads it.
"""

from __future__ import annotations

from collections.abc import Callable

from mypy.plugin import MethodContext, Plugin
from mypy.plugins.default import typed_dict_get_callback
from mypy.typeops import try_getting_str_literals
from mypy.types import Type, TypedDictType, get_proper_type


def _checked_get(ctx: MethodContext) -> Type:
    typed = get_proper_type(ctx.type)
    if isinstance(typed, TypedDictType) and ctx.args and len(ctx.args[0]) == 1:
        keys = try_getting_str_literals(ctx.args[0][0], ctx.arg_types[0][0]) or []
        for key in keys:
            if key not in typed.items:
                ctx.api.msg.typeddict_key_not_found(typed, key, ctx.args[0][0])
    return typed_dict_get_callback(ctx)


class TypedDictKeys(Plugin):
    def get_method_hook(self, fullname: str) -> Callable[[MethodContext], Type] | None:
        return _checked_get if fullname == "typing.Mapping.get" else None


def plugin(version: str) -> type[Plugin]:
    return TypedDictKeys

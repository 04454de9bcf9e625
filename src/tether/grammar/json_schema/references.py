"""``$ref``, ``$id``/``$anchor`` and ``allOf``: the conjunction a subschema stands for.

The document is indexed once (``$id``/``id``, ``$anchor``, JSON pointers); ``resolve``
finds a ``$ref`` target (in this document, or loaded by ``resolve_remote`` and indexed
then); ``flatten`` adds ``$ref`` targets and ``allOf`` branches to a conjunction, each
member once (a recursive reference cannot loop), and refuses a cycle that never reaches
a property or an item.
"""

from __future__ import annotations

import functools
import re
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin

from tether.errors import SchemaError, UnsupportedSchemaError, limited
from tether.grammar.json_schema.check import check_document
from tether.grammar.json_schema.context import DEFAULT_BASE, Context, Member, ptr
from tether.limits import check_deadline


def join_uri(base: str, ref: str) -> str:
    """Resolve ``ref`` against ``base`` (RFC 3986; also for non-hierarchical URNs).
    Memoized: a document names the same definitions in many ``$ref``s (a fragment
    against each base once)."""
    if ref.startswith("#"):
        return _defrag(base) + ref
    return _join_uri(base, ref)


@functools.lru_cache(maxsize=4096)
def _join_uri(base: str, ref: str) -> str:
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", ref):
        return ref
    return urljoin(base, ref)


def index_document(c: Context, doc: Any, base: str, pointer: str) -> None:
    c.docs[_split_fragment(base)[0]] = doc
    index_schema(c, doc, base, pointer)


# keywords whose value is an object of schemas, or a schema or an array of them (sets:
# every key of every schema object is looked up here)
_SCHEMA_MAPS = frozenset(("properties", "patternProperties", "$defs", "definitions", "dependentSchemas"))
_SCHEMA_VALUES = frozenset((
    "items", "prefixItems", "allOf", "anyOf", "oneOf", "additionalProperties", "additionalItems",
    "propertyNames", "contains", "not", "if", "then", "else", "unevaluatedProperties",
    "unevaluatedItems",
))


# each keyword ``index_schema`` walks into, by how: a map of schemas, a schema (or an
# array of them), ``dependencies`` (a map of schemas or name lists)
_MAP, _VALUE, _DEPENDENCIES = "map", "value", "dependencies"
_INDEXED = {**dict.fromkeys(_SCHEMA_MAPS, _MAP), **dict.fromkeys(_SCHEMA_VALUES, _VALUE),
            "dependencies": _DEPENDENCIES}


def index_schema(c: Context, s: Any, base: str, pointer: str) -> None:
    """Record ``$id``/``$anchor`` targets, base URIs and pointers below ``s``
    (pre-order, iterative: any depth; a Python object met twice is indexed once).

    A pointer is recorded as a (parent, part) pair below ``pointer``, its text written
    by ``pointer_of`` when asked for (only the targets of a ``$ref`` need it)."""
    c.index_version += 1  # (``flatten``'s memo of ``resolve`` lapses)
    stack: list[tuple[Any, str, Any]] = [(s, base, pointer)]
    visited: set[int] = set()
    index, base_of, ptr_of = c.index, c.base_of, c.ptr_of
    old_draft = c.draft in ("draft4", "draft6", "draft7")
    draft4 = c.draft == "draft4"
    while stack:
        s, base, p = stack.pop()
        if isinstance(s, list):
            stack.extend((s[i], base, (p, i)) for i in range(len(s) - 1, -1, -1))
            continue
        if not isinstance(s, dict) or id(s) in visited:
            continue
        visited.add(id(s))
        if "$id" in s or draft4 and "id" in s:
            ident = s.get("$id") if "$id" in s else s.get("id")
            if isinstance(ident, str) and not (old_draft and "$ref" in s):
                if ident.startswith("#") and old_draft:
                    index[join_uri(base, ident)] = s  # plain-name fragment (old drafts)
                else:
                    base = join_uri(base, ident)
                    index[_split_fragment(base)[0]] = s
                    c.docs.setdefault(_split_fragment(base)[0], s)
        if "$anchor" in s or "$dynamicAnchor" in s:
            for kw in ("$anchor", "$dynamicAnchor"):
                anchor = s.get(kw)
                if isinstance(anchor, str):
                    key = _split_fragment(base)[0] + "#" + anchor
                    if index.setdefault(key, s) is not s:  # two targets: no honest choice
                        raise SchemaError(f"{kw} {limited(anchor)} is defined twice in one "
                                          "schema resource", pointer_text(p))
        base_of[id(s)] = base
        ptr_of[id(s)] = p
        children: list[tuple[Any, str, Any]] = []
        for k, v in s.items():
            how = _INDEXED.get(k)
            if how is None:
                continue
            if how is _MAP:
                if isinstance(v, dict):
                    q = (p, k)
                    for name, sub in v.items():
                        if isinstance(sub, (dict, list)):  # (a boolean schema has no index)
                            children.append((sub, base, (q, name)))
            elif how is _VALUE:
                if isinstance(v, (dict, list)):
                    children.append((v, base, (p, k)))
            elif isinstance(v, dict):  # dependencies
                for name, sub in v.items():
                    if isinstance(sub, dict):
                        children.append((sub, base, ((p, k), name)))
        stack.extend(reversed(children))


def pointer_text(p: Any) -> str:
    """The JSON pointer text of ``p``: a text, or a (parent, part) pair over one."""
    parts = []
    while type(p) is tuple:
        p, part = p
        q = part if type(part) is str else str(part)
        if "~" in q or "/" in q:
            q = q.replace("~", "~0").replace("/", "~1")
        parts.append(q)
    parts.append(p)
    return "/".join(reversed(parts))


def pointer_of(c: Context, s: Any, default: str) -> str:
    """The pointer of the schema object ``s`` (``Context.ptr_of``) as text (written once),
    else ``default``."""
    p = c.ptr_of.get(id(s))
    if p is None:
        return default
    if type(p) is not str:
        p = c.ptr_of[id(s)] = pointer_text(p)
    return p


def resolve(c: Context, ref: Any, holder: dict[Any, Any], pointer: str) -> Member:
    if not isinstance(ref, str):
        raise SchemaError("'$ref' must be a string", pointer)
    base = c.base_of.get(id(holder), DEFAULT_BASE)
    target = join_uri(base, ref)
    if target in c.index:
        s = c.index[target]
        return s, pointer_of(c, s, target)
    uri, frag = _split_fragment(target)
    doc = c.docs.get(uri)
    if doc is None and uri in c.index:
        doc = c.index[uri]
    if doc is None:
        if c.resolve_remote is not None:
            try:
                doc = c.resolve_remote(uri)
            except Exception as exc:  # noqa: BLE001 - any loader failure is reported alike
                raise SchemaError(f"cannot load $ref {limited(ref)}: {exc}", pointer) from None
        if doc is None:
            raise UnsupportedSchemaError(
                "$ref", pointer, f"reference {limited(ref)} is not inside this document"
            )
        c.keep.append(doc)
        check_document(doc, c.limits, uri + "#", c.checked)
        index_document(c, doc, uri, uri + "#")
        if target in c.index:
            s = c.index[target]
            return s, pointer_of(c, s, target)
    node = doc
    if frag:
        found = c.pointer_targets.get((id(doc), frag))  # documents are not changed
        if found is not None:
            node = found
        elif not frag.startswith("/"):
            raise SchemaError(f"$ref {limited(ref)}: unknown anchor", pointer)
        else:
            for part in frag[1:].split("/"):
                part = unquote(part).replace("~1", "/").replace("~0", "~")
                if isinstance(node, dict) and part in node:
                    node = node[part]
                elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                    node = node[int(part)]
                else:
                    raise SchemaError(f"$ref {limited(ref)} points to nothing", pointer)
            c.pointer_targets[(id(doc), frag)] = node
    if isinstance(node, dict) and id(node) not in c.checked:
        # a target outside the schema positions walked so far (an unknown keyword)
        check_document(node, c.limits, pointer_of(c, node, target), c.checked)
    if isinstance(node, dict) and id(node) not in c.base_of:
        index_schema(c, node, uri, uri + "#" + frag)
    return node, pointer_of(c, node, target)


def _split_fragment(uri: str) -> tuple[str, str]:
    """``urldefrag(uri)``. Past the first ``#``, ``urldefrag`` keeps the fragment as it
    is and reads the rest alone, unless the text has a character ``urlsplit`` removes
    (tab, CR, LF) or strips (a leading control character or space); so the part before
    it is memoized (``_defrag``), not each target."""
    head, sep, frag = uri.partition("#")
    if not sep or "\t" in uri or "\r" in uri or "\n" in uri or uri[:1] <= " ":
        return _split_fragment_slow(uri)
    return _defrag(head + "#"), frag


@functools.lru_cache(maxsize=4096)
def _split_fragment_slow(uri: str) -> tuple[str, str]:
    found = urldefrag(uri)
    return found[0], found[1]


@functools.lru_cache(maxsize=4096)
def _defrag(uri: str) -> str:
    """``urldefrag(uri)[0]`` (memoized)."""
    return urldefrag(uri)[0]


# keywords ``flatten`` expands (or reports)
_EXPANDS = frozenset(("$ref", "allOf", "$dynamicRef", "$recursiveRef"))


def flatten(c: Context, members: list[Member]) -> list[Member] | None:
    """Add ``$ref`` targets and ``allOf`` branches; None if some member is ``false``.

    A member met again is skipped; met again *inside its own expansion* (a ``$ref``/
    ``allOf`` cycle that never reaches a property or an item) it is an error: such a
    schema asks a validator to loop forever.
    """
    if len(members) <= 1 and c.max_expansion >= 1:
        # the common cases: nothing, or one schema object with nothing to expand
        if not members:
            return []
        s = members[0][0]
        if s is True:
            return []
        if s is False:
            return None
        if isinstance(s, dict) and _EXPANDS.isdisjoint(s):
            return [members[0]]
    out: list[Member] = []
    seen: set[int] = set()
    on_path: set[int] = set()  # members whose $ref/allOf expansion is under way
    stack: list[Member | int] = list(reversed(members))  # an int: leave that member
    steps = 0
    while stack:
        top = stack.pop()
        if isinstance(top, int):
            on_path.discard(top)
            continue
        s, p = top
        steps += 1
        if steps > c.max_expansion:
            raise SchemaError(
                f"$ref/allOf expansion exceeds {c.max_expansion} schemas", p
            )
        if not steps & 255:
            check_deadline(p)
        if s is True:
            continue
        if s is False:
            return None
        if not isinstance(s, dict):
            raise SchemaError(f"a schema must be an object or a boolean, got {limited(s)}", p)
        if id(s) in seen:
            if id(s) in on_path:
                raise SchemaError(
                    "a $ref/allOf cycle: the schema refers to itself without a property "
                    "or an item in between (a validator would loop forever)", p)
            continue
        seen.add(id(s))
        if "$dynamicRef" in s or "$recursiveRef" in s:
            kw = "$dynamicRef" if "$dynamicRef" in s else "$recursiveRef"
            c.unsupported(kw, p)
        nxt: list[Member] = []
        if "$ref" in s:
            # ``resolve`` once per schema object while the index is unchanged (the
            # document is not; an error is raised the first time)
            known = c.resolved.get(id(s))
            if known is not None and known[0] == c.index_version:
                nxt.append(known[1])
            else:
                version = c.index_version
                target = resolve(c, s["$ref"], s, ptr(p, "$ref"))
                if c.index_version == version:
                    c.resolved[id(s)] = (version, target)
                nxt.append(target)
            if c.draft in ("draft4", "draft6", "draft7"):
                on_path.add(id(s))
                stack.append(id(s))
                stack.extend(reversed(nxt))
                continue  # siblings of $ref are ignored in these drafts
        out.append((s, p))
        all_of = s.get("allOf")
        if all_of is not None:
            if not isinstance(all_of, list):
                raise SchemaError("'allOf' must be an array", ptr(p, "allOf"))
            nxt += [(b, ptr(p, "allOf", i)) for i, b in enumerate(all_of)]
        on_path.add(id(s))
        stack.append(id(s))
        stack.extend(reversed(nxt))
    return out

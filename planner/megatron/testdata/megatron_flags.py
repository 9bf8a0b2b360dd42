#!/usr/bin/env python3
"""List every command-line flag Megatron-LM's parse_args() defines, without
importing Megatron (which needs torch): read megatron/training/arguments.py
with Python's ast module and collect

  * the option strings of every add_argument('--...') call, and
  * the flags ArgumentGroupFactory(ConfigClass, exclude=[...]).build_group
    generates from a config dataclass, by the rules of
    megatron/training/argument_utils.py: field foo_bar -> --foo-bar; a bool
    field that defaults to True -> --no-foo-bar and --disable-foo-bar; a
    field's metadata {"argparse_meta": {"arg_names": [...]}} replaces them;
    excluded and init=False fields give none. Fields of dataclass bases
    count (a subclass's field of the same name wins).

Usage (from the directory holding the extracted archive):
  python3 megatron_flags.py megatron-lm-core_v0.19.0 > megatron-core_v0.19.0-flags.txt
"""
import ast
import os
import sys

root = sys.argv[1]


def module_file(mod):
    base = os.path.join(root, *mod.split("."))
    return base + ".py" if os.path.exists(base + ".py") else os.path.join(base, "__init__.py")


def parse(path):
    with open(path) as f:
        return ast.parse(f.read(), path)


def imports_of(tree, path):
    """name -> module it is imported from (relative imports resolved)."""
    out = {}
    pkg = os.path.relpath(os.path.dirname(path), root).replace(os.sep, ".")
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                parts = pkg.split(".")
                parts = parts[: len(parts) - node.level + 1]
                mod = ".".join(parts + ([mod] if mod else []))
            for a in node.names:
                out[a.asname or a.name] = mod
    return out


def find_class(name, mod, seen=None):
    """(ClassDef, file) of name as seen from module mod, following re-exports."""
    seen = seen or set()
    if (name, mod) in seen:
        return None, None
    seen.add((name, mod))
    path = module_file(mod)
    if not os.path.exists(path):
        return None, None
    tree = parse(path)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node, path
    imp = imports_of(tree, path)
    if name in imp:
        return find_class(name, imp[name], seen)
    return None, None


def const(node):
    try:
        return ast.literal_eval(node)
    except Exception:
        return None


def fields(cls, path):
    """Ordered {field: flags} of a dataclass and its bases."""
    out = {}
    imp = imports_of(parse(path), path)
    mod = os.path.relpath(path, root)[:-3].replace(os.sep, ".").removesuffix(".__init__")
    for b in cls.bases:
        if isinstance(b, ast.Name):
            bc, bp = find_class(b.id, imp.get(b.id, mod))
            if bc is not None:
                out.update(fields(bc, bp))
    for st in cls.body:
        if not (isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)):
            continue
        name, ann, val = st.target.id, ast.unparse(st.annotation), st.value
        default, meta, init = None, None, True
        if isinstance(val, ast.Call) and ast.unparse(val.func).endswith("field"):
            for kw in val.keywords:
                if kw.arg == "default":
                    default = const(kw.value)
                elif kw.arg == "metadata":
                    meta = const(kw.value)
                elif kw.arg == "init":
                    init = const(kw.value)
        elif val is not None:
            default = const(val)
        if init is False:
            out[name] = []
            continue
        dashed = name.replace("_", "-")
        flags = ["--" + dashed]
        if ann == "bool" and default is True:
            flags = ["--no-" + dashed, "--disable-" + dashed]
        if isinstance(meta, dict) and isinstance(meta.get("argparse_meta"), dict):
            flags = meta["argparse_meta"].get("arg_names", flags)
        out[name] = flags
    return out


args_py = os.path.join(root, "megatron", "training", "arguments.py")
tree = parse(args_py)
imp = imports_of(tree, args_py)
flags = set()
for node in ast.walk(tree):
    if not isinstance(node, ast.Call):
        continue
    fn = ast.unparse(node.func)
    if fn.endswith("add_argument"):
        for a in node.args:
            v = const(a)
            if isinstance(v, str) and v.startswith("--"):
                flags.add(v)
    elif fn == "ArgumentGroupFactory" and node.args and isinstance(node.args[0], ast.Name):
        cname = node.args[0].id
        cls, path = find_class(cname, imp.get(cname, "megatron.training.arguments"))
        if cls is None:
            sys.exit(f"cannot find config class {cname}")
        exclude = set()
        for kw in node.keywords:
            if kw.arg == "exclude":
                if isinstance(kw.value, ast.Name):  # exclude=exclude: the list assigned just before
                    for st in ast.walk(tree):
                        if isinstance(st, ast.Assign) and any(isinstance(t, ast.Name) and t.id == kw.value.id for t in st.targets):
                            if st.lineno < node.lineno:
                                exclude = set(const(st.value) or [])
                else:
                    exclude = set(const(kw.value) or [])
        for name, fl in fields(cls, path).items():
            if name not in exclude:
                flags.update(fl)
print("\n".join(sorted(flags)))

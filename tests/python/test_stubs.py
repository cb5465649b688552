"""The type stubs (python/strata/**/*.pyi) say what the runtime has: every public module has a stub,
every public name (and public class member) exported at runtime is in its stub and every name in
a stub exists at runtime, and where inspect.signature can read a callable its parameter names
equal the stub's. The checker is shown to fail on copies of the stubs with a name removed, a name
added, a parameter renamed and a stub missing. help(strata.keras.Model.fit) shows Keras's keywords."""
import ast
import importlib
import inspect
import pathlib
import pydoc
import shutil

import pytest

import strata
from conftest import SOURCE_DIR

PACKAGE_DIR = SOURCE_DIR / "python" / "strata"


def public_modules(package_dir):
    """Module names of every public .py (no leading underscore in any part) under package_dir."""
    names = []
    for py in sorted(package_dir.rglob("*.py")):
        rel = py.relative_to(package_dir).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if any(p.startswith("_") for p in parts):
            continue
        names.append(".".join(["strata"] + parts))
    return names


def stub_path(package_dir, module_name):
    parts = module_name.split(".")[1:]
    as_package = package_dir.joinpath(*parts, "__init__.pyi")
    return as_package if package_dir.joinpath(*parts).is_dir() else package_dir.joinpath(*parts[:-1], parts[-1] + ".pyi")


def is_public(name):
    return not name.startswith("_")


def runtime_names(module):
    """What a module exports: __all__ when it has one, else its public names that are not imports
    of other libraries (modules outside strata, typing helpers, numpy functions...)."""
    if hasattr(module, "__all__"):
        return set(module.__all__)
    names = set()
    for name, value in vars(module).items():
        if not is_public(name):
            continue
        if inspect.ismodule(value):
            if value.__name__.startswith("strata."):
                names.add(name)
            continue
        owner = getattr(value, "__module__", None)
        if (inspect.isclass(value) or callable(value)) and not (owner or "").startswith("strata"):
            continue
        if type(value).__module__ == "typing" or owner == "typing":
            continue
        names.add(name)
    return names


def stub_params(node):
    a = node.args
    params = [p.arg for p in a.posonlyargs + a.args]
    if a.vararg:
        params.append("*" + a.vararg.arg)
    params += [p.arg for p in a.kwonlyargs]
    if a.kwarg:
        params.append("**" + a.kwarg.arg)
    return params


def runtime_params(obj):
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None  # a builtin without a readable signature (pybind11 functions)
    out = []
    for p in sig.parameters.values():
        out.append({p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "") + p.name)
    return out


def stub_members(body):
    """name -> ast node for a module or class body. Annotated names without a value are attributes
    set at run time (instance attributes); the rest are definitions."""
    out = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if isinstance(node, ast.FunctionDef) and any(
                    isinstance(d, ast.Name) and d.id == "overload" for d in node.decorator_list):
                out[node.name] = "overload"
            else:
                out[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = "attribute" if node.value is None else node
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = node
                if isinstance(t, ast.Name) and t.id == "__all__" and isinstance(node.value, (ast.List, ast.Tuple)):
                    for e in node.value.elts:  # a stub's __all__ re-exports what it lists
                        if isinstance(e, ast.Constant) and isinstance(e.value, str):
                            out.setdefault(e.value, "reexport")
        elif isinstance(node, (ast.ImportFrom, ast.Import)):
            for alias in node.names:
                if alias.asname is not None and alias.asname == alias.name.split(".")[-1]:
                    out[alias.asname] = "reexport"  # PEP 484: `from x import y as y` re-exports y
    return out


def compare_signature(where, runtime_obj, node, problems, method=False):
    if not isinstance(node, ast.FunctionDef):
        return
    got = runtime_params(runtime_obj)
    if got is None:
        return
    want = stub_params(node)
    if method and want and want[0] in ("self", "cls") and not (got and got[0] in ("self", "cls")):
        want = want[1:]
    if got != want:
        problems.append(f"{where}: parameters {got} at run time, {want} in the stub")


def check_class(where, cls, node, problems):
    members = stub_members(node.body)
    runtime = {n for n in vars(cls) if is_public(n)}
    if inspect.isclass(cls) and issubclass(cls, BaseException):
        runtime = set()  # exceptions: the stub lists the class; members are the built-in's
    for name in sorted(runtime - set(members)):
        problems.append(f"{where}.{name}: at run time, not in the stub")
    for name, stub in sorted(members.items()):
        if not is_public(name) and name != "__init__":
            continue
        if stub == "attribute":
            continue  # an instance attribute (set in __init__)
        if not hasattr(cls, name):
            problems.append(f"{where}.{name}: in the stub, not at run time")
            continue
        raw = inspect.getattr_static(cls, name)
        if isinstance(raw, (staticmethod, classmethod)):
            compare_signature(f"{where}.{name}", getattr(cls, name), stub, problems)
        elif inspect.isfunction(raw):
            compare_signature(f"{where}.{name}", raw, stub, problems, method=True)


def check_module(module_name, package_dir):
    """Problems (strings) between module_name at run time and its stub under package_dir."""
    problems = []
    stub = stub_path(package_dir, module_name)
    if not stub.exists():
        return [f"{module_name}: no stub ({stub.relative_to(package_dir)})"]
    module = importlib.import_module(module_name)
    members = stub_members(ast.parse(stub.read_text(), str(stub)).body)
    stub_public = {n for n in members if is_public(n) or n in getattr(module, "__all__", ())}
    runtime = runtime_names(module)
    for name in sorted(runtime - stub_public):
        problems.append(f"{module_name}.{name}: at run time, not in the stub")
    for name in sorted(stub_public - runtime):
        if not hasattr(module, name):
            problems.append(f"{module_name}.{name}: in the stub, not at run time")
    for name in sorted(stub_public & runtime):
        value, node = getattr(module, name), members[name]
        if isinstance(node, ast.ClassDef) and inspect.isclass(value):
            check_class(f"{module_name}.{name}", value, node, problems)
        elif isinstance(node, ast.FunctionDef) and callable(value):
            compare_signature(f"{module_name}.{name}", value, node, problems)
    return problems


def check_package(package_dir):
    problems = []
    for module_name in public_modules(package_dir):
        problems += check_module(module_name, package_dir)
    for pyi in sorted(package_dir.rglob("*.pyi")):
        if not pyi.with_suffix(".py").exists():
            problems.append(f"{pyi.relative_to(package_dir)}: a stub without a module")
    return problems


def test_every_public_module_matches_its_stub():
    assert "strata.distribute" in public_modules(PACKAGE_DIR)
    problems = check_package(PACKAGE_DIR)
    assert not problems, "\n".join(problems)


@pytest.fixture
def stub_copy(tmp_path):
    """The package's .py and .pyi files copied, to break the stubs without touching the tree."""
    copy = tmp_path / "strata"
    shutil.copytree(PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def edit(path, old, new):
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def test_the_check_fails_when_a_stub_lacks_a_name(stub_copy):
    edit(stub_copy / "distribute" / "__init__.pyi", "def has_strategy() -> bool: ...\n", "")
    assert "strata.distribute.has_strategy: at run time, not in the stub" in check_package(stub_copy)


def test_the_check_fails_when_a_stub_lacks_a_method(stub_copy):
    edit(stub_copy / "monitor.pyi", "    def pause(self) -> None: ...\n", "")
    assert "strata.monitor.Monitor.pause: at run time, not in the stub" in check_package(stub_copy)


def test_the_check_fails_when_a_stub_has_a_name_the_module_lacks(stub_copy):
    edit(stub_copy / "__init__.pyi", "def devices(", "def list_devices() -> None: ...\ndef devices(")
    assert "strata.list_devices: in the stub, not at run time" in check_package(stub_copy)


def test_the_check_fails_when_a_parameter_name_differs(stub_copy):
    edit(stub_copy / "__init__.pyi", "def devices(recalibrate: bool", "def devices(calibrate: bool")
    assert "strata.devices: parameters ['recalibrate'] at run time, ['calibrate'] in the stub" in check_package(stub_copy)


def test_the_check_fails_when_a_module_has_no_stub(stub_copy):
    (stub_copy / "monitor.pyi").unlink()
    assert "strata.monitor: no stub (monitor.pyi)" in check_package(stub_copy)


def test_help_shows_fits_keyword_names():
    text = pydoc.render_doc(strata.keras.Model.fit, renderer=pydoc.plaintext)
    for keyword in ("x=None", "y=None", "batch_size=None", "epochs=1", "validation_data=None", "callbacks=None"):
        assert keyword in text, text

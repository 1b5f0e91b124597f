"""The environment variables between ddp-sim and the Python side are named once per language: the
Python module ddph_audit/environment.py and the C++ header core/common/include/ddph/common/
environment.h name the same variables (AUDIT_DIR and kAuditDir for DDPH_AUDIT_DIR, ...), and no
other file of the product spells one of them."""

import os
import re
import unittest

from ddph_audit import environment
from tests import support

SOURCE_DIR = os.path.dirname(support.PYTHON_DIR)
HEADER = os.path.join(SOURCE_DIR, "core", "common", "include", "ddph", "common", "environment.h")
_CONSTANT = re.compile(r'inline\s+constexpr\s+const\s+char\s*\*\s*(k\w+)\s*=\s*"([^"]*)"\s*;')
_PYTHON_PACKAGES = ("ddph_audit", "ddph_emulation", "ddph_launch", "ddph_pytest", "ddph_elastic")
_CPP_FOLDERS = ("core", "simulator", "reference")


def header_names():
    """{"kAuditDir": "DDPH_AUDIT_DIR", ...} from the C++ header."""
    with open(HEADER, encoding="utf-8") as f:
        return dict(_CONSTANT.findall(f.read()))


def module_names():
    """{"AUDIT_DIR": "DDPH_AUDIT_DIR", ...} from the Python module."""
    return {k: v for k, v in vars(environment).items()
            if k.isupper() and isinstance(v, str) and v.startswith("DDPH_")}


def cpp_name(python_name):
    """"kauditdir" for "AUDIT_DIR": the header's name, compared without case ("kAuditDir")."""
    return "k" + python_name.replace("_", "").lower()


def product_files(root, folders, suffixes):
    for folder in folders:
        for base, dirs, names in os.walk(os.path.join(root, folder)):
            dirs[:] = [d for d in dirs if d not in ("tests", "__pycache__")]
            for name in names:
                if name.endswith(suffixes):
                    yield os.path.join(base, name)


class EnvironmentNamesTest(unittest.TestCase):
    def test_the_module_and_the_header_name_the_same_variables(self):
        cpp = header_names()
        self.assertTrue(cpp, "no inline constexpr name found in %s" % HEADER)
        python = {cpp_name(k): v for k, v in module_names().items()}
        self.assertEqual(python, {k.lower(): v for k, v in cpp.items()})
        for name, variable in module_names().items():
            self.assertEqual("DDPH_" + name, variable)

    def test_every_name_is_spelled_once_per_language(self):
        names = set(module_names().values())
        quoted = re.compile(r'"(%s)"' % "|".join(sorted(names)))
        spelled = {}
        python = product_files(support.PYTHON_DIR, _PYTHON_PACKAGES, (".py",))
        cpp = product_files(SOURCE_DIR, _CPP_FOLDERS, (".cpp", ".h"))
        for path in list(python) + list(cpp):
            with open(path, encoding="utf-8") as f:
                for name in quoted.findall(f.read()):
                    spelled.setdefault(name, set()).add(os.path.relpath(path, SOURCE_DIR))
        expected = {os.path.relpath(environment.__file__, SOURCE_DIR),
                    os.path.relpath(HEADER, SOURCE_DIR)}
        for name, where in sorted(spelled.items()):
            self.assertLessEqual(where, expected, name)


if __name__ == "__main__":
    unittest.main()

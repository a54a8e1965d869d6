"""A calculator tool: arithmetic evaluated from the Python AST, with no ``eval``.

Allowed: numbers, ``+ - * / // % **``, unary ``+ -``, parentheses, the constants ``pi``, ``e``,
``tau``, and the functions in ``FUNCTIONS``. Anything else (names, attributes, calls to other
functions, strings) is rejected with a message. Guards keep it cheap: expressions up to 500
characters, exponents up to 10 000 on integers, ``factorial`` up to 1 000, integer results up to
10 000 digits.
"""

from __future__ import annotations

import ast
import math
import operator
from typing import Any, Callable

from coevo.envs.base import Tool

MAX_CHARS = 500
MAX_EXPONENT = 10_000
MAX_DIGITS = 10_000

FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt, "exp": math.exp, "log": math.log, "log2": math.log2, "log10": math.log10,
    "sin": math.sin, "cos": math.cos, "tan": math.tan, "asin": math.asin, "acos": math.acos, "atan": math.atan,
    "floor": math.floor, "ceil": math.ceil, "abs": abs, "round": round, "min": min, "max": max,
    "gcd": math.gcd, "lcm": math.lcm, "comb": math.comb, "perm": math.perm,
    "factorial": lambda n: math.factorial(_bounded_factorial(n)),
}
CONSTANTS = {"pi": math.pi, "e": math.e, "tau": math.tau}
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def _bounded_factorial(n: Any) -> int:
    if not isinstance(n, int) or n < 0 or n > 1000:
        raise ValueError("factorial takes an integer between 0 and 1000")
    return n


def _check_size(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_DIGITS * 3.33:
        raise ValueError(f"result has more than {MAX_DIGITS} digits")
    return value


def _eval(node: ast.AST) -> Any:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name) and node.id in CONSTANTS:
        return CONSTANTS[node.id]
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and isinstance(right, (int, float)) and abs(right) > MAX_EXPONENT:
            raise ValueError(f"exponent {right} is larger than {MAX_EXPONENT}")
        return _check_size(_BINARY[type(node.op)](left, right))
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS
            and not node.keywords):
        return _check_size(FUNCTIONS[node.func.id](*[_eval(a) for a in node.args]))
    raise ValueError("not allowed in a calculator expression: "
                     f"{ast.unparse(node) if isinstance(node, ast.expr) else type(node).__name__}")


def calculate(expression: str) -> str:
    """Evaluate ``expression`` (see module doc) and return the result as text.

    Raises ``ValueError`` for a disallowed or too-large expression, ``ZeroDivisionError`` /
    ``OverflowError`` from the arithmetic itself (the harness turns them into observations).
    """
    text = str(expression).strip()
    if len(text) > MAX_CHARS:
        raise ValueError(f"expression longer than {MAX_CHARS} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as err:
        raise ValueError(f"not an arithmetic expression: {err.msg}") from None
    value = _eval(tree)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return repr(value)
    return str(value)


def calculator_tool() -> Tool:
    """The ``calculator`` tool: ``expression`` -> its value as text (see ``calculate``)."""
    return Tool(
        name="calculator",
        description="Evaluate an arithmetic expression, e.g. '(3 + 4) * sqrt(2)'. Supports + - * / // % **, "
                    "parentheses, pi, e and " + ", ".join(sorted(FUNCTIONS)) + ".",
        parameters={"type": "object", "properties": {"expression": {"type": "string", "description": "the expression"}},
                    "required": ["expression"]},
        fn=calculate)

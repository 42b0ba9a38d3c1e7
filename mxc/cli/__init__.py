"""The ``mxc`` command line: a thin shell over the Python API.

Each verb lives in its own module and registers itself with
:func:`register_command` (as tvmc does): the module adds its arguments to a
sub-parser and provides a ``run(args) -> int`` function.  Every
:class:`~mxc.errors.MxcError` becomes one readable line on stderr and the
error family's exit code; ``--verbose`` adds the traceback.
"""

from __future__ import annotations

import argparse
import logging
import sys
import traceback
from typing import Callable, NamedTuple

from ..errors import BROKEN_PIPE_EXIT_CODE, USAGE_EXIT_CODE, MxcError, describe_exit_codes
from ..interrupts import watch_interrupts
from ..registry import Registry
from .usage import UsageError


class Command(NamedTuple):
    """One verb: its arguments, its ``run(args) -> int`` and its one-line help."""

    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int | None]
    help: str


#: the verbs by name; their modules are imported when the parser is built
COMMANDS: Registry[Command] = Registry(
    "commands", noun="command", error=ValueError,
    builtins=("mxc.cli.compile_cmd", "mxc.cli.draw_cmd", "mxc.cli.export_cmd",
              "mxc.cli.inspect_cmd", "mxc.cli.keygen_cmd", "mxc.cli.opt_cmd",
              "mxc.cli.partition_cmd", "mxc.cli.quantize_cmd", "mxc.cli.run_cmd",
              "mxc.cli.serve_cmd", "mxc.cli.tune_cmd"))
_COMMANDS = COMMANDS  # the former private dict's name


def register_command(name: str, help: str):
    """Decorator for ``add_arguments(parser)``; the module's ``run`` is found by name."""
    def deco(add_arguments):
        module = sys.modules[add_arguments.__module__]
        COMMANDS.register(name, Command(add_arguments, lambda args: module.run(args), help),
                          origin=add_arguments)
        return add_arguments
    return deco


def _load_commands() -> None:
    COMMANDS.load_builtins()


class _Parser(argparse.ArgumentParser):
    """argparse with its usage error on :data:`~mxc.errors.USAGE_EXIT_CODE` (64), so a
    mistyped command line never shares an exit code with an error family (argparse's
    own 2 is :class:`~mxc.errors.FrontendError`'s)."""

    def error(self, message: str):
        self.print_usage(sys.stderr)
        self.exit(USAGE_EXIT_CODE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    from .common import add_load_argument
    _load_commands()
    parser = _Parser(
        prog="mxc", description="Ahead-of-time compiler for Apache MXNet models.",
        epilog=describe_exit_codes())
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="more logging; with an error, print the traceback")
    from .. import __version__
    parser.add_argument("--version", action="version", version=f"mxc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, (add_arguments, _, help_text) in sorted(COMMANDS.items()):
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("-v", "--verbose", action="count", default=0, dest="sub_verbose",
                       help=argparse.SUPPRESS)
        add_arguments(p)
        add_load_argument(p)
        p.set_defaults(verb_parser=p)   # usage errors found later print this verb's usage
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:   # argparse would blame the top-level parser and print its usage
        args.verb_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    verbose = args.verbose + getattr(args, "sub_verbose", 0)
    logging.basicConfig(level=logging.WARNING - 10 * min(verbose, 2),
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        from .common import load_extensions
        load_extensions(args)
        with watch_interrupts():   # a Ctrl-C inside TVM's C++ code is still "interrupted"
            code = int(COMMANDS.lookup(args.command).run(args) or 0)
        sys.stdout.flush()   # a closed pipe shows here, not in the interpreter's exit
        return code
    except BrokenPipeError:
        return _output_closed()
    except UsageError as exc:
        args.verb_parser.print_usage(sys.stderr)
        print(f"mxc {args.command}: error: {exc}", file=sys.stderr)
        return USAGE_EXIT_CODE
    except MxcError as exc:
        if verbose:
            traceback.print_exc()
        print(f"mxc {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except (OSError, ValueError) as exc:
        if verbose:
            traceback.print_exc()
        print(f"mxc {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    except Exception as exc:  # noqa: BLE001 - a bug: still one line without -v
        if verbose:
            traceback.print_exc()
        print(f"mxc {args.command}: internal error: {type(exc).__name__}: {exc} "
              f"(run with -v for the traceback)", file=sys.stderr)
        return 1
    print(f"mxc {args.command}: interrupted", file=sys.stderr)
    return 130


def _output_closed() -> int:
    """The reader of our output went away (``mxc inspect ... | head -1``): stop quietly, as
    coreutils do (they die of SIGPIPE, which the shell reports as 141), without the
    traceback Python prints when it flushes a broken stdout at exit."""
    import os
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):   # stdout is no file (captured, replaced)
        pass
    return BROKEN_PIPE_EXIT_CODE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

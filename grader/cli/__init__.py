"""The `grade` command: thin click wrappers around one module per verb."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from grader.cli.batch import batch
from grader.cli.options import grading_options
from grader.core.pieces import MODULES, PIECES
from grader.runner.formats import FORMATS, help_text
from grader.runner.results import Limits


class LabGroup(click.Group):
    """`grade PIECE...` and `grade --format json` go to the default verb, `check`, whose options `grade --help`
    lists first: they are the ones a student uses."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h")):
            args = ["check", *args]
        return super().parse_args(ctx, args)

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        check = self.commands["check"]
        sub = click.Context(check, info_name="grade", parent=ctx)
        rows = [row for param in check.get_params(sub)
                if isinstance(param, click.Option) and (row := param.get_help_record(sub))]
        with formatter.section("Options (grade [PIECES]... [OPTIONS]; pieces: " + ", ".join(PIECES) + ")"):
            formatter.write_dl(rows)
        self.format_commands(ctx, formatter)


class GraderError(click.ClickException):
    """A fault of the grader's setup (a wrong seal key, a sealed file that does not open): one line, exit code 2,
    no usage text, since the command line was right."""

    exit_code = 2


@click.group(cls=LabGroup)
def cli() -> None:
    """Grade the attention lab. `grade` alone grades ./exercises; `grade encoder luong` grades two pieces;
    `grade exercises/lesson.ipynb` grades the notebook's piece cells."""
    from grader.runner import sealing

    sealing.harden()
    sealing.take_key()  # out of the environment before any child process starts


def _submission(path: Path, scratch: Path) -> Path:
    """The folder to grade: `path` itself, or the piece cells of a notebook extracted into `scratch`.

    In a folder that holds lesson.ipynb (exercises/), each piece's .py file is graded unless it is still the
    untouched stub; then the notebook's cell for the piece is (notebook.combine). Working only in the
    notebook thus earns the same grade, in the per-push grade too, as editing the files; stderr says which was graded.
    """
    from grader.lesson.ipynb import NotebookError
    from grader.lesson.notebook import NOTEBOOK
    from grader.runner import report

    given = path
    if path.suffix == ".ipynb" and path.is_file():
        from grader.lesson.notebook import extract

        try:
            return extract(path, scratch / "notebook").resolve()
        except NotebookError as e:  # its reason may quote the notebook's text: escaped as every report escapes it
            raise click.BadParameter(report.safe(str(e), 500), param_hint="--submission") from None
    if not path.exists():
        raise click.BadParameter(f"{path} does not exist; pass the folder that holds your encoder.py, additive.py, ...", param_hint="--submission")
    if not path.is_dir():
        raise click.BadParameter(f"{path} is a file; pass the folder laid out like exercises/", param_hint="--submission")
    from grader.core.files import is_link

    for link in (path, path / NOTEBOOK.name):  # the regrade's and Gradescope's rule: a link is never followed
        if is_link(link):
            raise click.BadParameter(f"{report.safe(str(link), 300)} is a symbolic link; the grader reads only real "
                                     "files and folders: put the file itself there", param_hint="--submission")
    if (path / NOTEBOOK.name).is_file():
        from grader.lesson.notebook import combine, describe

        try:
            path, files = combine(path, scratch / "combined")
            click.echo(describe(files), err=True)
        except NotebookError as e:  # the .py files can still be graded; say why the notebook was not read
            click.echo(f"{report.safe(str(e), 500)}; graded: the .py files only", err=True)
        except Exception as e:  # noqa: BLE001 - a notebook no check foresaw: the .py files are still graded
            click.echo(f"{NOTEBOOK.name} cannot be read ({type(e).__name__}); graded: the .py files only", err=True)
    if not any((path / f"{m}.py").is_file() for m in MODULES):
        raise click.BadParameter(f"{given} holds none of the lab's files ({', '.join(m + '.py' for m in MODULES)})", param_hint="--submission")
    return path.resolve()


@cli.command()
@click.argument("pieces", nargs=-1)
@click.option("--submission", "-s", type=click.Path(path_type=Path), default=Path("exercises"), show_default=True,
              help="Folder laid out like exercises/ to grade.")
@click.option("--format", "fmt", type=click.Choice(list(FORMATS)), default="text", show_default=True, help=help_text())
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), default=None, help="Write the report here instead of stdout.")
@grading_options
@click.option("--plots", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Also train your model and write its attention heatmap and length curve (PNG) here.")
def check(pieces: tuple[str, ...], submission: Path, fmt: str, out: Path | None, seed: str | None,
          case_timeout: float, piece_timeout: float, memory_gb: float, quick: bool, plots: Path | None) -> None:
    """Grade PIECES (default: all) of a submission folder or notebook (`grade lesson.ipynb` works too)."""
    import tempfile

    from grader.verbs import grade as verb

    notebooks = [p for p in pieces if p.endswith(".ipynb")]
    if len(notebooks) > 1:
        raise click.BadParameter("grade one notebook at a time", param_hint="PIECES")
    if notebooks:
        submission = Path(notebooks[0])
        pieces = tuple(p for p in pieces if p not in notebooks)
        if not submission.is_file():
            raise click.BadParameter(f"{submission} does not exist", param_hint="NOTEBOOK")
    unknown = [p for p in pieces if p not in PIECES]
    if unknown:
        raise click.BadParameter(f"no piece named {', '.join(unknown)}; pieces are {', '.join(PIECES)}", param_hint="PIECES")
    if quick and not FORMATS[fmt].quick:
        raise click.UsageError(f"--quick cannot go with --format {fmt}: a quick run leaves out the training cases "
                               "and is not a grade; the per-push grade runs in full")
    refused = FORMATS[fmt].refuse()
    if refused:
        raise click.UsageError(refused)
    from grader.runner.layout import SealError, current

    try:
        current()
    except SealError as e:
        raise GraderError(str(e)) from None
    with tempfile.TemporaryDirectory(prefix="attnlab-cli-") as scratch:
        code = verb.main(submission=_submission(submission, Path(scratch)), pieces=list(dict.fromkeys(pieces)), fmt=fmt,
                         seed=seed, limits=Limits(case_timeout, piece_timeout, memory_gb, quick), out=out,
                         echo=lambda text: click.echo(text, color=sys.stdout.isatty()), plots=plots,
                         label=str(submission.resolve()))  # a notebook's own path, not its scratch folder
    sys.exit(code)


cli.add_command(batch)


def instructor_only(what: str) -> None:
    """A one-line usage error where the command needs the reference, which a student release leaves out."""
    from grader import REFERENCE

    if not REFERENCE.is_dir():
        raise click.UsageError(f"`grade {what}` is an instructor command: it needs reference/, which this student "
                               "checkout does not have. Students need only `grade` (and `grade --plots`).")


@cli.group()
def release() -> None:
    """Build the student repository or the solutions."""
    instructor_only("release")


@release.command("student")
@click.argument("out", type=click.Path(path_type=Path, file_okay=False))
@click.option("--seal-key-file", "--key-file", "key_file", type=click.Path(path_type=Path, dir_okay=False),
              default=None, help="Seal with the key in this file. Default: ATTNLAB_SEAL_KEY, else the previous "
              "release's key file OUT.seal-key, else a new key written there (mode 0600).")
@click.option("--new-key", is_flag=True, help="Seal with a new key, written to OUT.seal-key: the Actions secret "
              "ATTNLAB_SEAL_KEY must then be updated, since the old key does not open this release.")
def release_student(out: Path, key_file: Path | None, new_key: bool) -> None:
    """Stubs, notebook, grader, data and workflow, with the reference, hidden cases and answering lab code sealed."""
    from grader.runner import sealing
    from grader.verbs import release as verb

    try:
        chosen, said = verb.build_student(out, key_file=key_file, env_key=sealing.held_key(), new_key=new_key)
    except FileExistsError as e:
        raise click.BadParameter(str(e), param_hint="OUT") from None
    except verb.ReleaseError as e:
        raise GraderError(str(e)) from None
    click.echo(f"wrote the student release to {out}\n{said}\n"
               f"Keep {chosen.path} out of the release. Its contents are the repository or organisation secret "
               f"ATTNLAB_SEAL_KEY, with which the per-push workflow opens the hidden cases.")


@release.command("classroom50")
@click.argument("out", type=click.Path(path_type=Path, file_okay=False))
@click.option("--classroom", required=True, help="The Classroom 50 classroom's short name (e.g. fall26).")
@click.option("--assignment", required=True, help="The assignment's short name (e.g. attention-lab).")
@click.option("--runs-on", "runs_on", default="self-hosted,attnlab", show_default=True,
              help="The labels of the self-hosted runner that holds the seal key (comma-separated); 'github' grades "
              "on GitHub-hosted runners, which hold no key and run the public checks only.")
@click.option("--seal-key-file", "key_file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Seal with the key in this file. Default: ATTNLAB_SEAL_KEY, else OUT.seal-key, else a new key there.")
@click.option("--new-key", is_flag=True, help="Seal with a new key, written to OUT.seal-key.")
def release_classroom50(out: Path, classroom: str, assignment: str, runs_on: str, key_file: Path | None,
                        new_key: bool) -> None:
    """The template repository and the autograder folder for a Classroom 50 assignment (see OUT/SETUP.md)."""
    from grader.runner import sealing
    from grader.verbs import classroom50 as verb
    from grader.verbs.release import ReleaseError

    labels = () if runs_on.strip() == "github" else tuple(x.strip() for x in runs_on.split(",") if x.strip())
    try:
        lines = verb.main(out=out, classroom=classroom, assignment=assignment, runs_on=labels, key_file=key_file,
                          env_key=sealing.held_key(), new_key=new_key)
    except FileExistsError as e:
        raise click.BadParameter(str(e), param_hint="OUT") from None
    except ReleaseError as e:
        raise click.UsageError(str(e)) from None
    for line in lines:
        click.echo(line)


@release.command("regrade")
@click.argument("out", type=click.Path(path_type=Path, file_okay=False))
@click.option("--repository", is_flag=True,
              help="Make OUT the whole grading repository (the lab and the engines' files, and no other workflow: "
                   "pushing it starts only the regrade); OUT must be new or empty.")
def release_regrade(out: Path, repository: bool) -> None:
    """The class regrade over an engine: a GitHub Actions workflow, a Slurm job array, a Kubernetes Indexed Job."""
    from grader.verbs import engines as verb

    try:
        paths = verb.write_repository(out) if repository else verb.write(out)
    except FileExistsError as e:
        raise click.BadParameter(f"{e.filename or e} exists already; move it away or write to another folder",
                                 param_hint="OUT") from None
    for path in paths:
        click.echo(f"wrote {path}")
    click.echo("See docs/regrade.md: the secrets to set, the number of shards, rerunning a failed shard.")


@release.command("gradescope")
@click.argument("out", type=click.Path(path_type=Path))
def release_gradescope(out: Path) -> None:
    """The Gradescope autograder zip: setup.sh, run_autograder, the grader with the reference and hidden cases."""
    from grader.verbs import gradescope as verb

    path = verb.build(out)
    click.echo(f"wrote {path} ({path.stat().st_size // 1024} KB). Upload it as the assignment's autograder "
               "(Ubuntu base image); students upload their .py pieces, a .zip of them or lesson.ipynb.")


@release.command("solutions")
@click.argument("out", type=click.Path(path_type=Path, file_okay=False))
@click.option("--no-execute", is_flag=True, help="Write the solution notebook without running it.")
def release_solutions(out: Path, no_execute: bool) -> None:
    """The reference code and the solution notebook, executed, with its plots."""
    from grader.verbs import release as verb

    try:
        click.echo(f"wrote the solutions to {verb.solutions(out, execute=not no_execute)}")
    except verb.ReleaseError as e:
        raise click.UsageError(str(e)) from None


@cli.command()
def stubs() -> None:
    """Regenerate exercises/ and grader/core/piece_facts.json from reference/ (solution blocks become NotImplementedError)."""
    instructor_only("stubs")
    from grader.lesson import notebook, stubs as verb

    for path in [*verb.main(), notebook.write()]:
        click.echo(f"wrote {path}")


@cli.command()
def generate() -> None:
    """Regenerate everything made from reference/, the notebook text and the cases: grader/core/piece_facts.json,
    exercises/ (the stubs and lesson.ipynb) and the manifests (`grade stubs`, then `grade manifest`)."""
    instructor_only("generate")
    from grader.lesson import notebook, stubs as making
    from grader.runner import manifest as collecting

    for path in [*making.main(), notebook.write()]:
        click.echo(f"wrote {path}")
    data = collecting.write()
    click.echo(f"wrote grader/cases/manifest.json and grader/public/manifest.json: {sum(map(len, data.values()))} "
               f"cases, {sum(c['points'] for v in data.values() for c in v)} points")


@cli.command()
def manifest() -> None:
    """Recollect the hidden cases into grader/cases/manifest.json."""
    instructor_only("manifest")
    from grader.runner import manifest as verb

    data = verb.write()
    click.echo(f"{sum(map(len, data.values()))} cases, {sum(c['points'] for v in data.values() for c in v)} points")


@cli.command()
def artifacts() -> None:
    """Retrain the small models the cases need (grader/artifacts) from their fixed seeds."""
    instructor_only("artifacts")
    from grader import REFERENCE
    from grader.judge.reference_code import load_reference
    from grader.lab import artifacts as verb

    for name, digest in verb.build(load_reference(REFERENCE)).items():
        click.echo(f"{name}: sha256 {digest}")


@cli.command()
def data() -> None:
    """Regenerate the toy task's splits from the seeded generator and print their checksums."""
    from grader.lab import toy

    for split, digest in toy.write_splits().items():
        click.echo(f"{split}: sha256 {digest}")

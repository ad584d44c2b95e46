"""`grade batch`: regrade a class, clone it, merge its shards, verify its per-push results; thin click wrappers
around grader/verbs/batch.py, grader/regrade/collect.py, grader/verbs/merge.py and grader/verbs/verify.py (`grade`
itself is grader/cli/__init__.py)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from grader.cli.options import grading_options, size_option
from grader.runner.results import Limits


class BatchGroup(click.Group):
    """`grade batch SUBMISSIONS...` regrades; `grade batch collect DEST` clones the class; `grade batch merge
    PARTS...` merges the shards' parts; `grade batch verify FOLDER` checks the per-push results."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # `class` is the hidden name of the regrade itself: a folder of that name is a class to grade
        if not args or args[0] not in self.commands or (args[0] == "class" and os.path.lexists(args[0])):
            args = ["class", *args]
        return super().parse_args(ctx, args)


class ClassCommand(click.Command):
    def format_usage(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write_usage("grade batch", " ".join(self.collect_usage_pieces(ctx)))


def _checked(param: click.Parameter, value, read, *errors: type[Exception]):
    """`read(value)`, or None for no value; one of `errors` a BadParameter naming the option as given."""
    try:
        return read(value) if value is not None else None
    except errors as e:
        raise click.BadParameter(str(e), param_hint=param.opts[0]) from None


# each imports its reader when its command runs, not when the command line loads
def _shard(ctx: click.Context, param: click.Parameter, value: str | None):
    from grader.regrade import shard

    return _checked(param, value, shard.parse, shard.ShardError)


def _deadline(ctx: click.Context, param: click.Parameter, value: str | None):
    from grader.regrade import deadline

    return _checked(param, value, deadline.parse, ValueError)


def _roster(ctx: click.Context, param: click.Parameter, value: Path | None):
    from grader.regrade import roster

    return _checked(param, value, roster.read, roster.RosterError)


def _prefix(ctx: click.Context, param: click.Parameter, value: str | None):
    from grader.regrade import roster

    return _checked(param, value, roster.check_prefix, roster.RosterError)


def _keys(ctx: click.Context, param: click.Parameter, value: Path | None):
    from grader.regrade import perpush

    return _checked(param, value, perpush.Release.read, perpush.ReleaseError)


def roster_options(command):
    """--roster and --prefix: the class from a roster, each student's repository PREFIX + username."""
    options = [
        click.option("--roster", type=click.Path(path_type=Path, dir_okay=False, exists=True), default=None,
                     callback=_roster, help="The class list: Classroom 50's roster.csv (its students) or one GitHub "
                     "username a line (# comments)."),
        click.option("--prefix", default=None, callback=_prefix, metavar="PREFIX",
                     help="Student U's repository is PREFIX + U, lowercased (Classroom 50: "
                          "<classroom>-<assignment>-, e.g. fall26-attention-lab-)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


known_option = click.option(
    "--known", type=click.Path(path_type=Path, file_okay=False, exists=True), multiple=True, metavar="FOLDER",
    help="A known source for the similarity report, beside the reference (which an instructor's checkout holds): "
         "an earlier term's class folder (the -code folder beside its gradebook: a match is 'FOLDER/student'), or "
         "a folder of the lab's modules. A student matching one is listed under it, not as a copy. Repeatable.")


def _tally(gradebook: Path, graded: int, bad: int) -> str:
    """How the rows ended, in words (late and without a repository apart from unreadable), read back from the
    gradebook just written; the bare counts where it cannot be read."""
    import csv

    from grader.regrade.rowstatus import tally

    try:
        with open(gradebook, newline="", encoding="utf-8") as f:
            return tally(csv.DictReader(f))
    except (OSError, csv.Error, UnicodeDecodeError):
        return f"graded {graded} submission(s), {bad} unreadable"


@click.group(cls=BatchGroup)
def batch() -> None:
    """Regrade a class (`grade batch SUBMISSIONS...`), clone it (`grade batch collect DEST`), merge its shards
    (`grade batch merge PARTS...`), or verify its signed Classroom 50 results (`grade batch verify FOLDER`)."""


@batch.command("class", cls=ClassCommand, hidden=True)
@click.argument("submissions", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), default=Path("grades.csv"), show_default=True,
              help="CSV gradebook: student, piece scores, total; its reports, code, manifest and class reports "
                   "go beside it.")
@click.option("--reports", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Folder for one JSON report per student (default: next to the CSV).")
@click.option("--jobs", "-j", type=int, default=None, help="Submissions graded at once (default: the number of cores).")
@click.option("--shard", "shard_spec", default=None, callback=_shard, metavar="K/N",
              help="Grade only part K of N (the same student always in the same part of a class list); auto/N "
                   "takes K from a Slurm job array or a Kubernetes Indexed Job. Then `grade batch merge`.")
@click.option("--before", "deadline", default=None, callback=_deadline, metavar="DATETIME",
              help="Grade each repository at its last commit before this time (ISO 8601 with its zone, e.g. "
                   "2026-12-01T23:59:00-05:00); later commits are not graded, and the row says so.")
@click.option("--release", type=click.Path(path_type=Path, file_okay=False, exists=True), default=None,
              help="The student release the class was given (grade release student OUT): the gradebook's "
                   "release_files column names every repository whose workflow, grader or other release files differ.")
@roster_options
@click.option("--scores-csv", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Also write the gradebook with Classroom 50's scores.csv columns here.")
@click.option("--verify", "keys", type=click.Path(path_type=Path, exists=True), default=None, callback=_keys,
              metavar="RELEASE", help="The Classroom 50 release (grade release classroom50 OUT): the column per_push, "
              "beside the regrade's score, says what each student's signed per-push result is worth (as `grade batch "
              "verify`: verified S/M, forged, unsigned, replayed or missing).")
@click.option("--disk-budget", default=None, callback=size_option, metavar="SIZE",
              help="Disk the students being staged may fill at once, each counted at its worst case (e.g. 4G, "
                   "500M; default 4G). A smaller budget stages fewer at once; a student alone is staged whatever it is.")
@known_option
@grading_options
def batch_class(submissions: tuple[Path, ...], out: Path, reports: Path | None, jobs: int | None, release: Path | None,
                shard_spec, deadline, roster, prefix: str | None, scores_csv: Path | None, keys,
                disk_budget: int | None, known: tuple[Path, ...], quick: bool, seed: str | None, case_timeout: float,
                piece_timeout: float, memory_gb: float) -> None:
    """Regrade a class: per student a repository, its exercises/ folder, a .zip or a .ipynb, in parallel; or a
    folder of them, as `grade batch collect` and `gh teacher download` write. With --roster and --prefix the class
    is the roster's students: one without a repository gets an error row, a repository of no student's is left
    out. Links in a submission are never followed. A rerun resumes: a student already graded with
    the same inputs keeps their row. `grade batch merge PARTS...` makes the shards' parts one gradebook."""
    import os

    from grader.verbs import batch as verb
    from grader.runner.display import resolve_seed

    missing = [str(p) for p in submissions if not os.path.lexists(p)]  # a dangling link is a student's error row
    if missing:
        raise click.BadParameter(f"not found: {', '.join(missing)}", param_hint="SUBMISSIONS")
    if (roster is None) != (prefix is None):
        raise click.UsageError("--roster and --prefix go together: student U's repository is PREFIX + U (--prefix '' "
                               "where the folders are named by username alone)")
    if scores_csv is not None and os.path.abspath(scores_csv) == os.path.abspath(out):
        raise click.BadParameter("is the gradebook itself: give the scores.csv a path of its own",
                                 param_hint="--scores-csv")
    if not seed and not os.environ.get("ATTNLAB_SEED"):  # as the Actions regrade warns (templates/regrade)
        click.echo("warning: no --seed and no ATTNLAB_SEED: the class is graded with the lab's default hidden seed, "
                   "which every copy of the lab holds; give a secret seed of your own for a regrade that counts",
                   err=True)
    try:
        graded, bad = verb.main(submissions=list(submissions), out=out, reports=reports,
                                jobs=jobs or verb.default_jobs(), seed=resolve_seed(seed), release=release,
                                shard=shard_spec, before=deadline, limits=Limits(case_timeout, piece_timeout,
                                                                                 memory_gb, quick),
                                roster=roster, prefix=prefix or "", scores=scores_csv, disk=disk_budget, keys=keys,
                                known=list(known))
    except verb.ReportsFolder as e:
        raise click.BadParameter(str(e), param_hint="--reports") from None
    part = f"shard {shard_spec}: " if shard_spec else ""
    also = f"; scores.csv: {scores_csv}" if scores_csv else ""
    click.echo(f"{part}{_tally(out, graded, bad)}; gradebook: {out}{also}")


@batch.command("collect")
@click.argument("dest", type=click.Path(path_type=Path, file_okay=False))
@click.option("--org", required=True, help="The GitHub organization (or user) that holds the students' repositories.")
@roster_options
@click.option("--jobs", "-j", type=click.IntRange(1, 16), default=4, show_default=True,
              help="Repositories cloned at once.")
def batch_collect(dest: Path, org: str, roster, prefix: str | None, jobs: int) -> None:
    """Clone the class into DEST with the GitHub CLI (gh repo clone ORG/PREFIX+username, whole history): each
    roster student's repository, or without --roster every repository of ORG starting with PREFIX (gh repo list).
    A rerun keeps the clones already there. Students without a repository are listed at the end, one a line."""
    from grader.regrade import collect as verb
    from grader.regrade.roster import RosterError

    if prefix is None:
        raise click.UsageError("--prefix is needed: student U's repository is ORG/PREFIX + U, e.g. --prefix "
                               "fall26-attention-lab-")
    try:
        done = verb.main(dest=dest, org=org, prefix=prefix, roster=roster, jobs=jobs,
                         say=lambda line: click.echo(line, err=True))
    except RosterError as e:
        raise click.BadParameter(str(e)) from None
    except verb.GhError as e:
        raise click.ClickException(str(e)) from None
    # every student in exactly one count: a clone left out for its size (this run's or a placeholder already
    # there) is neither cloned nor kept, and it is graded as an error row
    click.echo(f"{dest}: {len(done.cloned)} cloned, {len(done.kept)} already there, {len(done.missing)} without a "
               f"repository, {len(done.cut)} left out as too large, "
               f"{len(done.failed)} not cloned, of {done.students} student(s)")
    for student, repo in done.missing:
        click.echo(f"no repository: {student} (expected {org}/{repo})")
    for student, repo, why in done.failed:
        click.echo(f"not cloned: {student} ({org}/{repo}): {why}")
    if done.failed:
        sys.exit(1)


@batch.command("merge")
@click.argument("parts", nargs=-1, required=True, type=click.Path(path_type=Path, exists=True))
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), default=Path("grades.csv"), show_default=True,
              help="The class's one gradebook; its reports, code, manifest, class and similarity reports go beside it.")
@click.option("--scores-csv", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Also write the gradebook with Classroom 50's scores.csv columns here.")
@known_option
def batch_merge(parts: tuple[Path, ...], out: Path, scores_csv: Path | None, known: tuple[Path, ...]) -> None:
    """Merge the parts `grade batch --shard K/N` wrote (their CSVs, or folders holding them) into one gradebook,
    byte for byte the one an unsharded run writes. Refuses a missing shard (naming its students), a shard given
    twice, and parts of different runs."""
    import os

    from grader.verbs import merge as verb

    if scores_csv is not None and os.path.abspath(scores_csv) == os.path.abspath(out):
        raise click.BadParameter("is the gradebook itself: give the scores.csv a path of its own",
                                 param_hint="--scores-csv")
    try:
        graded, bad, said = verb.main(parts=list(parts), out=out, known=list(known))
    except verb.MergeError as e:
        raise click.ClickException(str(e)) from None
    if scores_csv is not None:
        from grader.regrade import scores

        said += f"; scores.csv: {scores.from_parts(scores_csv, list(parts))}"
    click.echo(f"merged {graded + bad} student(s) ({_tally(out, graded, bad)}) into {out}; {said}")


@batch.command("verify")
@click.argument("folder", type=click.Path(path_type=Path, file_okay=False, exists=True))
@click.option("--release", "release", type=click.Path(path_type=Path, exists=True), required=True,
              help="The folder `grade release classroom50 OUT` wrote (OUT): its attestation.json holds the public key, "
                   "classroom, assignment and autograder digest the results must match (no secret).")
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), default=Path("verified-scores.csv"),
              show_default=True,
              help="The scores.csv (Classroom 50's columns) with a score for verified students only.")
@roster_options
def batch_verify(folder: Path, release: Path, out: Path, roster, prefix: str | None) -> None:
    """Check each student's per-push Classroom 50 result in FOLDER (what `gh teacher download` wrote) against the
    release, grading nothing: `verified S/M`, or forged, unsigned, replayed or missing and why. Exits 1 when any
    student's result is not verified. With --roster, the roster's students (their folders <classroom>-<assignment>-
    username unless --prefix says otherwise)."""
    from grader.regrade.perpush import ReleaseError
    from grader.verbs import verify as verb

    try:
        counts = verb.main(folder=folder, release=release, out=out, roster=roster, prefix=prefix, say=click.echo)
    except ReleaseError as e:
        raise click.BadParameter(str(e), param_hint="--release") from None
    except verb.VerifyError as e:
        raise click.BadParameter(str(e), param_hint=e.param) from None
    if sum(counts.values()) != counts["verified"]:
        sys.exit(1)

from grader.cli import cli

cli(prog_name="grade")

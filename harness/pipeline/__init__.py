"""One run: the typed request from the command line's choices, the stage sequence
(stages.py), the run directory and the end of the run (runner.py), and the stages that
go over a run again (perfboots.py, testeach.py). The workflows (bisect, devloop, nightly)
call its public functions; the stages import nothing from it."""

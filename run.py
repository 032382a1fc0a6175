"""python run.py model=... method=... benchmark=... budget=...  (the same as `goose-run`; see goose.cli)"""

from goose.cli import main

if __name__ == "__main__":
    main()

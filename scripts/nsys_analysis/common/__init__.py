"""What every script of scripts/ shares and no analysis: exit statuses, the rules for reading and
writing files, the table formatter, matplotlib's setup, where the programs are, the time-limited
runner, and the argparse types.
Imports nothing from the other sub-packages."""

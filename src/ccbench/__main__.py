from ccbench.cli import main

main()

from profiler_core.cli import main

main()

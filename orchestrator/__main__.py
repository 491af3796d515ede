from orchestrator.faces.cli import main

main()

"""Research code that runs inside one sweep cell. Never imports sweeper, Ray or MLflow."""

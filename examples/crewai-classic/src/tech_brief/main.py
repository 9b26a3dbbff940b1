#!/usr/bin/env python
import sys
import warnings
from datetime import datetime

from tech_brief.crew import TechBrief

warnings.filterwarnings("ignore", category=SyntaxWarning, module="pysbd")


def run():
    """Run the crew."""
    inputs = {
        "topic": "AI agents",
        "current_year": str(datetime.now().year),
    }
    try:
        TechBrief().crew().kickoff(inputs=inputs)
    except Exception as e:
        raise Exception(f"An error occurred while running the crew: {e}")


def train():
    """Train the crew for a given number of iterations."""
    inputs = {"topic": "AI agents", "current_year": str(datetime.now().year)}
    try:
        TechBrief().crew().train(n_iterations=int(sys.argv[1]), filename=sys.argv[2], inputs=inputs)
    except Exception as e:
        raise Exception(f"An error occurred while training the crew: {e}")

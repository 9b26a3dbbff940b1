from typing import Type

from crewai.tools import BaseTool
from pydantic import BaseModel, Field


class WordCounterInput(BaseModel):
    """What the word counter takes."""

    text: str = Field(..., description="The text whose words to count.")


class WordCounterTool(BaseTool):
    name: str = "Word counter"
    description: str = "Counts the words in a text, to keep notes within a length."
    args_schema: Type[BaseModel] = WordCounterInput

    def _run(self, text: str) -> str:
        return f"{len(text.split())} words"

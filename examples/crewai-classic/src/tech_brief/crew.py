from typing import List

from crewai import Agent, Crew, Process, Task
from crewai.agents.agent_builder.base_agent import BaseAgent
from crewai.project import CrewBase, agent, crew, task
from pydantic import BaseModel, Field

from tech_brief.tools.custom_tool import WordCounterTool


class Brief(BaseModel):
    """A brief on a topic."""

    title: str = Field(..., description="A short title for the brief")
    key_points: List[str] = Field(..., description="The three points that matter most")
    notes_word_count: int = Field(..., description="How many words the research notes have")


@CrewBase
class TechBrief:
    """The tech brief crew."""

    agents: List[BaseAgent]
    tasks: List[Task]

    agents_config = "config/agents.yaml"
    tasks_config = "config/tasks.yaml"

    @agent
    def researcher(self) -> Agent:
        return Agent(
            config=self.agents_config["researcher"],  # type: ignore[index]
            tools=[WordCounterTool()],
            verbose=True,
        )

    @agent
    def editor(self) -> Agent:
        return Agent(
            config=self.agents_config["editor"],  # type: ignore[index]
            verbose=True,
        )

    @task
    def research_task(self) -> Task:
        return Task(
            config=self.tasks_config["research_task"],  # type: ignore[index]
        )

    @task
    def brief_task(self) -> Task:
        return Task(
            config=self.tasks_config["brief_task"],  # type: ignore[index]
            context=[self.research_task()],
            output_pydantic=Brief,
            output_file="brief.json",
        )

    @crew
    def crew(self) -> Crew:
        """Creates the tech brief crew."""
        return Crew(
            agents=self.agents,
            tasks=self.tasks,
            process=Process.sequential,
            verbose=True,
        )

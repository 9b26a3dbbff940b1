"""The bookshop's catalogue as an MCP server (stdio), written with the official Python SDK.

Run by the crew for each kickoff (`mcps:` in config/agents.yaml); `pip install mcp` provides it.
"""

try:
    from mcp.server.mcpserver import MCPServer  # mcp 2.x
except ImportError:
    from mcp.server.fastmcp import FastMCP as MCPServer  # mcp 1.x

server = MCPServer("bookshop-catalog")

BOOKS = [
    {"isbn": "978-0-00-000001-1", "title": "The River's Long Memory", "author": "Ada Kern", "topics": ["rivers", "history"], "stock": 3},
    {"isbn": "978-0-00-000002-8", "title": "Deltas", "author": "Ivo Sand", "topics": ["rivers", "geography"], "stock": 0},
    {"isbn": "978-0-00-000003-5", "title": "Night Trains", "author": "Mira Holt", "topics": ["travel"], "stock": 5},
]


@server.tool()
def search_catalog(query: str) -> str:
    """Books whose title or topics match the query: one line per book, `isbn | title | author`."""
    words = query.lower().split()
    found = [
        f"{book['isbn']} | {book['title']} | {book['author']}"
        for book in BOOKS
        if any(word in book["title"].lower() or word in book["topics"] for word in words)
    ]
    return "\n".join(found) if found else "no books match"


@server.tool()
def stock_level(isbn: str) -> str:
    """How many copies of the book (by ISBN) are on the shelves."""
    for book in BOOKS:
        if book["isbn"] == isbn:
            return f"{book['stock']} in stock"
    return f"unknown ISBN {isbn}"


if __name__ == "__main__":
    server.run()

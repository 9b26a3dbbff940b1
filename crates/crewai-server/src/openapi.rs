//! The OpenAPI 3.1 document served at `/openapi.json`, written by hand: seven routes do not
//! warrant a derive framework and its build time, and the CLI's API test walks every path and
//! method it lists against the running server, so the document cannot drift from the router.

use serde_json::{Value, json};

fn error_response(description: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    })
}

fn id_parameter() -> Value {
    json!([{"name": "id", "in": "path", "required": true, "schema": {"type": "string"},
            "description": "The kickoff_id POST /kickoff returned."}])
}

/// The document.
pub fn document() -> Value {
    let unauthorized = error_response("Missing or wrong bearer token.");
    let unavailable =
        error_response("The queue's database is unavailable; retry after `Retry-After` seconds.");
    let unknown = error_response("No kickoff has this id.");
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "crewai serve",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Kickoffs of one crew through a durable queue (CrewAI AMP's /inputs, /kickoff and /status, plus events, cancel and resume)."
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {"error": {"type": "object", "required": ["code", "message"], "properties": {
                        "code": {"type": "string"}, "message": {"type": "string"}, "details": {}
                    }}}
                },
                "KickoffState": {"type": "string", "enum": ["queued", "running", "completed", "failed", "cancelled", "dead_lettered"]},
                "Accepted": {"type": "object", "required": ["kickoff_id"], "properties": {
                    "kickoff_id": {"type": "string"}, "state": {"$ref": "#/components/schemas/KickoffState"}
                }}
            }
        },
        "security": [{"bearer": []}],
        "paths": {
            "/openapi.json": {"get": {
                "summary": "This document.", "security": [],
                "responses": {"200": {"description": "The OpenAPI document."}}
            }},
            "/inputs": {"get": {
                "summary": "The inputs the crew's placeholders use, and the defaults its crew file gives.",
                "responses": {
                    "200": {"description": "Input names.", "content": {"application/json": {"schema": {"type": "object", "properties": {
                        "inputs": {"type": "array", "items": {"type": "string"}}, "defaults": {"type": "object"}
                    }}}}},
                    "401": unauthorized
                }
            }},
            "/kickoff": {"post": {
                "summary": "Queue a kickoff.",
                "parameters": [{"name": "Idempotency-Key", "in": "header", "required": false, "schema": {"type": "string", "maxLength": 255},
                                "description": "A repeat with the same key and inputs returns the first kickoff (200)."}],
                "requestBody": {"required": true, "content": {"application/json": {"schema": {
                    "type": "object", "additionalProperties": false,
                    "properties": {"inputs": {"type": "object"}}
                }}}},
                "responses": {
                    "202": {"description": "Queued.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Accepted"}}}},
                    "200": {"description": "The kickoff an earlier request with this Idempotency-Key created."},
                    "400": error_response("Malformed JSON or Idempotency-Key."),
                    "401": unauthorized,
                    "409": error_response("The Idempotency-Key was used with other inputs."),
                    "413": error_response("The body is over the size limit."),
                    "415": error_response("Not application/json."),
                    "422": error_response("Unknown fields, wrong types, or inputs the crew needs and was not given."),
                    "503": unavailable
                }
            }},
            "/status/{id}": {"get": {
                "summary": "A kickoff's state, per-task progress, result, error and usage.",
                "parameters": id_parameter(),
                "responses": {"200": {"description": "The kickoff."}, "401": unauthorized, "404": unknown, "503": unavailable}
            }},
            "/runs/{id}/events": {"get": {
                "summary": "The kickoff's events as Server-Sent Events (resumable with Last-Event-ID); the stream ends when the kickoff does.",
                "parameters": id_parameter(),
                "responses": {"200": {"description": "text/event-stream"}, "401": unauthorized, "404": unknown, "503": unavailable}
            }},
            "/runs/{id}/cancel": {"post": {
                "summary": "Cancel a queued kickoff, or ask a running one to stop (journaled as cancelled, resumable).",
                "parameters": id_parameter(),
                "responses": {"202": {"description": "The state after the request."}, "401": unauthorized, "404": unknown, "503": unavailable}
            }},
            "/runs/{id}/resume": {"post": {
                "summary": "Queue a failed, cancelled or dead-lettered kickoff again; finished tasks are not re-run.",
                "parameters": id_parameter(),
                "responses": {"202": {"description": "Queued."}, "401": unauthorized, "404": unknown,
                              "409": error_response("The kickoff is queued, running or completed."), "503": unavailable}
            }}
        }
    })
}

"""Access-log reports for the API gateway."""

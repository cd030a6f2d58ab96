"""What every layer shares: the tables (events, queries, runs), the items a ranking hands
on, the errors, text analysis (tokens, stems, sentences, passages), small numeric helpers
(linear models), private files and a thread pool. It imports nothing else of memkit."""

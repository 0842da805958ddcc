# One image for the four services, the CLI and kubesim: `podherd run <service>`, `podherd sim`, ...
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY shared shared
COPY services services
COPY podherd podherd
COPY kubesim kubesim
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
RUN useradd --uid 10001 --create-home podherd
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
COPY deploy /usr/share/podherd/deploy
USER 10001
EXPOSE 8080
ENTRYPOINT ["podherd"]
CMD ["--help"]
